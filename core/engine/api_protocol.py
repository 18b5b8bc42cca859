"""Request bodies of the HTTP API, checked and turned into prompts and SamplingParams.

Every problem becomes a `BadRequest` with a message that names the field and says what is
accepted, so a client gets a 4xx it can act on and the engine never sees a malformed request.
OpenAI features the engine does not have (n > 1, logprobs, penalties, tools...) are refused
with a clear message instead of being silently ignored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from .sampling import InvalidSamplingParams, SamplingParams

COMPLETION_DEFAULT_MAX_TOKENS = 16  # OpenAI's default for /v1/completions
CHAT_DEFAULT_MAX_TOKENS = 256  # OpenAI has none (the context); a random model never stops by itself


class BadRequest(Exception):
    def __init__(self, message: str, status: int = 400, param: str | None = None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.param = param


@dataclass
class Work:
    """One HTTP request's worth of engine requests: prompts and their sampling parameters."""

    prompts: list[list[int]]
    params: list[SamplingParams]
    batch: bool  # the client sent a list of prompts (answer with a list / several choices)
    stream: bool
    include_usage: bool = False
    request_ids: list[str] | None = None  # SGLang's `rid`, when the client names its requests


def parse_body(raw: bytes) -> dict:
    if not raw.strip():
        raise BadRequest("the request body is empty; send a JSON object")
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise BadRequest(f"the request body is not valid JSON: {err}") from None
    if not isinstance(body, dict):
        raise BadRequest(f"the request body must be a JSON object, got {type(body).__name__}")
    return body


def _is_int_list(x) -> bool:
    return isinstance(x, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in x)


def check_ids(ids: list[int], vocab_size: int, what: str) -> list[int]:
    if not ids:
        raise BadRequest(f"{what} is empty; send at least one token", param=what)
    bad = [t for t in ids if t < 0 or t >= vocab_size]
    if bad:
        raise BadRequest(f"{what} holds token id(s) {bad[:5]} outside the vocabulary [0, {vocab_size})", param=what)
    return ids


def _encode(tokenizer, text: str, what: str) -> list[int]:
    if not text:
        raise BadRequest(f"{what} is empty; send some text", param=what)
    return list(tokenizer(text, add_special_tokens=False).input_ids)


def _reject_unsupported(body: dict) -> None:
    checks = (
        ("n", lambda v: v not in (None, 1), "only n=1 is supported; send several requests instead"),
        ("best_of", lambda v: v not in (None, 1), "best_of is not supported"),
        ("echo", lambda v: bool(v), "echo is not supported"),
        ("logprobs", lambda v: v not in (None, False, 0), "logprobs are not supported"),
        ("top_logprobs", lambda v: v not in (None, 0), "logprobs are not supported"),
        ("presence_penalty", lambda v: v not in (None, 0, 0.0), "presence_penalty is not supported; leave it at 0"),
        ("frequency_penalty", lambda v: v not in (None, 0, 0.0), "frequency_penalty is not supported; leave it at 0"),
        ("logit_bias", lambda v: bool(v), "logit_bias is not supported"),
        ("suffix", lambda v: bool(v), "suffix is not supported"),
        ("tools", lambda v: bool(v), "tools are not supported by this engine"),
    )
    for key, bad, message in checks:
        if key in body and bad(body[key]):
            raise BadRequest(f"{key}={body[key]!r}: {message}", param=key)


def _openai_sampling(body: dict, default_max_tokens: int) -> SamplingParams:
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    stop = body.get("stop")
    if stop is not None and not isinstance(stop, (str, list)):
        raise BadRequest("stop must be a string or a list of strings", param="stop")
    values = {
        "max_new_tokens": default_max_tokens if max_tokens is None else max_tokens,
        "temperature": 1.0 if body.get("temperature") is None else body["temperature"],
        "top_p": 1.0 if body.get("top_p") is None else body["top_p"],
        "top_k": -1 if body.get("top_k") is None else body["top_k"],  # an extension, as vLLM/SGLang
        "seed": body.get("seed"),
        "stop": () if stop is None else stop,
        "ignore_eos": bool(body.get("ignore_eos", False)),
    }
    return _make_params(values)


def _make_params(values: dict) -> SamplingParams:
    try:
        return SamplingParams(**values)
    except InvalidSamplingParams as err:
        raise BadRequest(str(err)) from None
    except TypeError as err:  # wrong types that the dataclass itself trips on
        raise BadRequest(f"bad sampling parameter: {err}") from None


def _stream_flags(body: dict) -> tuple[bool, bool]:
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise BadRequest("stream must be true or false", param="stream")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise BadRequest("stream_options must be an object", param="stream_options")
    return stream, bool(options.get("include_usage", False))


def completion_work(body: dict, tokenizer, vocab_size: int) -> Work:
    """`/v1/completions`: prompt is a string, a list of strings, a token list or a list of them."""
    _reject_unsupported(body)
    prompt = body.get("prompt")
    if prompt is None:
        raise BadRequest("prompt is missing", param="prompt")
    if isinstance(prompt, str):
        prompts, batch = [_encode(tokenizer, prompt, "prompt")], False
    elif _is_int_list(prompt) and prompt:
        prompts, batch = [check_ids(prompt, vocab_size, "prompt")], False
    elif isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt):
        prompts, batch = [_encode(tokenizer, p, f"prompt[{i}]") for i, p in enumerate(prompt)], True
    elif isinstance(prompt, list) and prompt and all(_is_int_list(p) for p in prompt):
        prompts, batch = [check_ids(p, vocab_size, f"prompt[{i}]") for i, p in enumerate(prompt)], True
    else:
        raise BadRequest("prompt must be a string, a list of strings, a list of token ids, or a list of such lists",
                         param="prompt")
    params = _openai_sampling(body, COMPLETION_DEFAULT_MAX_TOKENS)
    stream, usage = _stream_flags(body)
    return Work(prompts, [params] * len(prompts), batch, stream, usage)


def _message_text(message, i: int) -> dict:
    if not isinstance(message, dict) or "role" not in message:
        raise BadRequest(f"messages[{i}] must be an object with a role and content", param="messages")
    content = message.get("content")
    if content is None:
        content = ""
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text":
                raise BadRequest(f"messages[{i}].content: only text parts are supported", param="messages")
            parts.append(str(part.get("text", "")))
        content = "".join(parts)
    if not isinstance(content, str):
        raise BadRequest(f"messages[{i}].content must be a string or a list of text parts", param="messages")
    return {"role": str(message["role"]), "content": content}


def chat_work(body: dict, tokenizer) -> Work:
    """`/v1/chat/completions`: the messages through the tokenizer's own chat template."""
    _reject_unsupported(body)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list of {role, content} objects", param="messages")
    messages = [_message_text(m, i) for i, m in enumerate(messages)]
    if not getattr(tokenizer, "chat_template", None):
        raise BadRequest("this model's tokenizer has no chat template; use /v1/completions instead", param="messages")
    try:
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    except Exception as err:  # noqa: BLE001 - template errors are the client's messages
        raise BadRequest(f"the chat template could not render these messages: {err}", param="messages") from None
    if isinstance(ids, dict) or hasattr(ids, "input_ids"):  # transformers 5 may return a BatchEncoding
        ids = ids["input_ids"]
    params = _openai_sampling(body, CHAT_DEFAULT_MAX_TOKENS)
    stream, usage = _stream_flags(body)
    return Work([list(ids)], [params], False, stream, usage)


def generate_work(body: dict, tokenizer, vocab_size: int) -> Work:
    """SGLang's `/generate`: `text` or `input_ids` (one or a batch), `sampling_params` (one or per item)."""
    has_text, has_ids = body.get("text") is not None, body.get("input_ids") is not None
    if has_text == has_ids:
        raise BadRequest("send exactly one of text or input_ids")
    if has_ids:
        ids = body["input_ids"]
        if _is_int_list(ids) and ids:
            prompts, batch = [check_ids(ids, vocab_size, "input_ids")], False
        elif isinstance(ids, list) and ids and all(_is_int_list(p) for p in ids):
            prompts, batch = [check_ids(p, vocab_size, f"input_ids[{i}]") for i, p in enumerate(ids)], True
        else:
            raise BadRequest("input_ids must be a non-empty list of token ids or a list of such lists",
                             param="input_ids")
    else:
        text = body["text"]
        if isinstance(text, str):
            prompts, batch = [_encode(tokenizer, text, "text")], False
        elif isinstance(text, list) and text and all(isinstance(t, str) for t in text):
            prompts, batch = [_encode(tokenizer, t, f"text[{i}]") for i, t in enumerate(text)], True
        else:
            raise BadRequest("text must be a string or a non-empty list of strings", param="text")
    raw = body.get("sampling_params") or {}
    if isinstance(raw, list):
        if len(raw) != len(prompts):
            raise BadRequest(f"sampling_params has {len(raw)} entries for {len(prompts)} prompts",
                             param="sampling_params")
        params = [_generate_params(p) for p in raw]
    else:
        params = [_generate_params(raw)] * len(prompts)
    if body.get("return_logprob"):
        raise BadRequest("return_logprob is not supported by this engine", param="return_logprob")
    stream, _ = _stream_flags(body)
    return Work(prompts, params, batch, stream, request_ids=_request_ids(body.get("rid"), len(prompts)))


def _request_ids(rid, n: int) -> list[str] | None:
    if rid is None:
        return None
    rids = [rid] if isinstance(rid, str) else rid
    if not isinstance(rids, list) or len(rids) != n or not all(isinstance(r, str) and r for r in rids):
        raise BadRequest(f"rid must be a non-empty string (one prompt) or a list of {n} strings", param="rid")
    if len(set(rids)) != n:
        raise BadRequest("rid holds the same id twice; give each prompt its own", param="rid")
    return rids


def _generate_params(raw) -> SamplingParams:
    if not isinstance(raw, dict):
        raise BadRequest("sampling_params must be an object", param="sampling_params")
    try:
        return SamplingParams.from_dict(raw)
    except InvalidSamplingParams as err:
        raise BadRequest(f"sampling_params: {err}", param="sampling_params") from None
    except TypeError as err:
        raise BadRequest(f"sampling_params: {err}", param="sampling_params") from None
