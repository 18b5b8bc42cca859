"""Request-body schemas for `/openapi.json`, from the same field lists the parser checks.

Handlers read raw bytes (so that parsing can leave the event loop), which leaves FastAPI nothing to
infer; these schemas describe what `api_protocol` accepts, so schema-driven clients and fuzzers
(schemathesis) see the real contract. Fields the parser knows only to refuse are listed with the
one value it accepts.
"""

from __future__ import annotations

from bringup.core.engine.logprobs import MAX_TOP_LOGPROBS

from .protocol import CHAT_FIELDS, COMPLETION_FIELDS, GENERATE_FIELDS

_TOKENS = {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1}
_STOP = {"anyOf": [{"type": "string", "minLength": 1},
                   {"type": "array", "items": {"type": "string", "minLength": 1}}, {"type": "null"}]}
_COMMON = {
    "model": {"type": "string", "description": "the served model name (see /v1/models); optional"},
    "max_tokens": {"type": "integer", "minimum": 1},
    "temperature": {"type": "number", "minimum": 0, "description": "0 (or below 1e-5) is greedy"},
    "top_p": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
    "top_k": {"type": "integer", "minimum": -1},
    "seed": {"type": "integer", "minimum": 0, "maximum": 2**63 - 1},
    "stop": _STOP,
    "stop_token_ids": {"type": "array", "items": {"type": "integer", "minimum": 0}},
    "stream": {"type": "boolean"},
    "stream_options": {"type": "object", "properties": {"include_usage": {"type": "boolean"},
                                                        "continuous_usage_stats": {"type": "boolean"}},
                       "additionalProperties": False},
    "ignore_eos": {"type": "boolean"},
    "user": {"type": "string"},
    "n": {"const": 1}, "presence_penalty": {"const": 0},
    "frequency_penalty": {"const": 0}, "logit_bias": {"type": "object", "maxProperties": 0},
    "min_p": {"const": 0}, "min_tokens": {"const": 0}, "repetition_penalty": {"const": 1},
    "skip_special_tokens": {"const": True}, "service_tier": {"enum": ["auto", "default"]},
    "metadata": {"type": "object", "maxProperties": 0}, "store": {"const": False},
}
_COMPLETION = {
    "prompt": {"anyOf": [{"type": "string", "minLength": 1}, _TOKENS,
                         {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1},
                         {"type": "array", "items": _TOKENS, "minItems": 1}]},
    "best_of": {"const": 1}, "echo": {"const": False}, "suffix": {"const": ""},
    "logprobs": {"anyOf": [{"type": "integer", "minimum": 0, "maximum": MAX_TOP_LOGPROBS}, {"type": "null"},
                           {"const": False}]},
}
_MESSAGE = {"type": "object", "required": ["role"], "additionalProperties": False, "properties": {
    "role": {"type": "string", "minLength": 1}, "name": {"type": "string"},
    "content": {"anyOf": [{"type": "string"}, {"type": "null"}, {"type": "array", "items": {
        "type": "object", "required": ["type", "text"],
        "properties": {"type": {"const": "text"}, "text": {"type": "string"}}}}]}}}
_CHAT = {
    "messages": {"type": "array", "items": _MESSAGE, "minItems": 1},
    "max_completion_tokens": {"type": "integer", "minimum": 1}, "logprobs": {"type": ["boolean", "null"]},
    "top_logprobs": {"anyOf": [{"type": "integer", "minimum": 0, "maximum": MAX_TOP_LOGPROBS}, {"type": "null"}]},
    "response_format": {"type": "object", "properties": {"type": {"const": "text"}}, "required": ["type"]},
    "tools": {"type": "array", "maxItems": 0}, "functions": {"type": "array", "maxItems": 0},
    "tool_choice": {"enum": ["none", "auto"]}, "function_call": {"enum": ["none", "auto"]},
    "parallel_tool_calls": {"type": "boolean"}, "modalities": {"const": ["text"]},
    "audio": {"type": "null"}, "prediction": {"type": "null"}, "reasoning_effort": {"type": "null"},
    "web_search_options": {"type": "null"},
}
_SAMPLING_PARAMS = {"type": "object", "additionalProperties": False, "properties": {
    "max_new_tokens": {"type": "integer", "minimum": 1}, "temperature": _COMMON["temperature"],
    "top_p": _COMMON["top_p"], "top_k": _COMMON["top_k"], "seed": _COMMON["seed"], "stop": _STOP,
    "stop_token_ids": _COMMON["stop_token_ids"], "ignore_eos": {"type": "boolean"}}}
_GENERATE = {
    "model": _COMMON["model"],
    "text": {"anyOf": [{"type": "string", "minLength": 1},
                       {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1}]},
    "input_ids": {"anyOf": [_TOKENS, {"type": "array", "items": _TOKENS, "minItems": 1}]},
    "sampling_params": {"anyOf": [_SAMPLING_PARAMS, {"type": "array", "items": _SAMPLING_PARAMS}]},
    "stream": {"type": "boolean"},
    "rid": {"anyOf": [{"type": "string", "minLength": 1}, {"type": "array", "items": {"type": "string", "minLength": 1}}]},
    "return_logprob": {"const": False},
}


def _body(properties: dict, fields: frozenset, required: list[str], one_of: list | None = None) -> dict:
    missing = sorted(fields - set(properties))
    assert not missing, f"schema lacks {missing}"  # the parser and the schema must list the same fields
    schema = {"type": "object", "properties": {k: properties[k] for k in sorted(fields)},
              "additionalProperties": False}
    if required:
        schema["required"] = required
    if one_of:
        schema["oneOf"] = one_of
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def openapi_bodies() -> dict[str, dict]:
    return {
        "completions": _body({**_COMMON, **_COMPLETION}, COMPLETION_FIELDS, ["prompt"]),
        "chat": _body({**_COMMON, **_CHAT, "max_tokens": _COMMON["max_tokens"]}, CHAT_FIELDS, ["messages"]),
        "generate": _body(_GENERATE, GENERATE_FIELDS, [], [{"required": ["text"]}, {"required": ["input_ids"]}]),
    }
