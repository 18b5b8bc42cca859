"""The HTTP face of the embedded engine (`bringup serve`): OpenAI and SGLang APIs, limits, metrics, drain.

It reaches the engine only through `Engine`, `SamplingParams` and the device helpers; the engine
(core/engine/) never imports this room.
"""
