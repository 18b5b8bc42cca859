"""Request bodies of the HTTP API, checked and turned into prompts and SamplingParams.

Every problem becomes a `BadRequest` with a message that names the field and says what is
accepted, so a client gets a 4xx it can act on and the engine never sees a malformed request.
OpenAI features the engine does not have (n > 1, logprobs, penalties, tools, JSON mode...) are
refused with a clear message instead of being silently ignored, and so is any field this server
does not know. Parsing and tokenising run in a worker thread (see server.py), never on the event loop.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from bringup.core.engine.logprobs import MAX_TOP_LOGPROBS
from bringup.core.engine.sampling import InvalidSamplingParams, SamplingParams

from .limits import Rejected

COMPLETION_DEFAULT_MAX_TOKENS = 16  # OpenAI's default for /v1/completions
CHAT_DEFAULT_MAX_TOKENS = 256  # OpenAI has none (the context); a random model never stops by itself


# JSON nested deeper than this is no request of ours (ours go 4 deep); refusing it early also keeps
# the decoder's recursion far from Python's limit.
MAX_JSON_DEPTH = 32
MAX_STOP_STRINGS = 16  # each is searched for after every token (OpenAI allows 4)


class BadRequest(Exception):
    def __init__(self, message: str, status: int = 400, param: str | None = None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.param = param


@dataclass(frozen=True)
class ParseContext:
    """What turning a body into engine work needs besides the body."""

    tokenizer: object
    vocab_size: int
    max_prompts: int = 1 << 30
    model_names: tuple[str, ...] = ()  # names a request's `model` may take; empty: any
    context_len: int | None = None
    max_queued_tokens: int | None = None
    max_token_bytes: int | None = None  # see max_token_bytes(): None, no byte pre-check


def max_token_bytes(tokenizer) -> int | None:
    """The most bytes of text one token can stand for, when that bounds the token count from below.

    A byte-level tokenizer (GPT-2's scheme, Nemotron's, Llama 3's, every GGUF BPE) puts every byte
    of the text in some token, so B bytes hold at least B / (longest token's bytes) tokens: a text
    far over the context can be refused before it is tokenised (seconds for megabytes). An NFC
    normaliser can shrink text at most 4x (a 4-byte character stays at least 1 byte); any other
    normaliser or pre-tokenizer may drop text (whitespace splitting, accent stripping): None, no
    pre-check, only the exact check after tokenising.
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or "ByteLevel" not in repr(backend.pre_tokenizer):
        return None
    normalizer = type(backend.normalizer).__name__ if backend.normalizer is not None else None
    if normalizer not in (None, "NFC"):
        return None
    try:
        longest = max((len(token.encode("utf-8")) for token in tokenizer.get_vocab()), default=0)
    except (AttributeError, TypeError):
        return None
    return longest * (4 if normalizer else 1) or None


@dataclass
class Work:
    """One HTTP request's worth of engine requests: prompts and their sampling parameters."""

    prompts: list[list[int]]
    params: list[SamplingParams]
    batch: bool  # the client sent a list of prompts (answer with a list / several choices)
    stream: bool
    include_usage: bool = False
    continuous_usage: bool = False  # stream_options.continuous_usage_stats: usage so far on every chunk
    request_ids: list[str] | None = None  # SGLang's `rid`, when the client names its requests
    max_tokens_given: bool = True  # False: the default max_tokens, which may be trimmed to fit the pool


def error_body(message: str, status: int, param: str | None = None) -> dict:
    """OpenAI's error shape (plus SGLang's top-level `message`)."""
    kind = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
            405: "invalid_request_error", 413: "invalid_request_error", 415: "invalid_request_error",
            429: "rate_limit_error", 503: "service_unavailable"}.get(status, "server_error")
    return {"object": "error", "error": {"message": message, "type": kind, "param": param, "code": status},
            "message": message}


def parse_body(raw: bytes) -> dict:
    if not raw.strip():
        raise BadRequest("the request body is empty; send a JSON object")
    try:
        body = json.loads(raw)
    except RecursionError:
        raise BadRequest(f"the request body is nested too deeply; at most {MAX_JSON_DEPTH} levels are accepted") from None
    except UnicodeDecodeError as err:
        raise BadRequest(f"the request body is not UTF-8 text: {err}") from None
    except ValueError as err:  # JSONDecodeError, and integers longer than Python converts
        raise BadRequest(f"the request body is not valid JSON: {err}") from None
    if not isinstance(body, dict):
        raise BadRequest(f"the request body must be a JSON object, got {type(body).__name__}")
    check_tree(body)
    return body


def check_tree(body) -> None:
    """Refuse JSON nested too deep, and strings with lone UTF-16 surrogates (valid JSON escapes,
    but no text: the tokenizer and the UTF-8 answer would both fail on them), naming the field."""
    todo = [(body, "", 1)]
    while todo:
        value, path, depth = todo.pop()
        if depth > MAX_JSON_DEPTH:
            raise BadRequest(f"{path or 'the body'} is nested deeper than {MAX_JSON_DEPTH} levels", param=_root(path))
        if isinstance(value, dict):
            for key, item in value.items():
                where = f"{path}.{key}" if path else str(key)
                if not _is_text(key):
                    raise BadRequest(f"a key in {path or 'the body'} holds a lone UTF-16 surrogate; send valid Unicode",
                                     param=_root(path) or None)
                todo.append((item, where, depth + 1))
        elif isinstance(value, list):
            todo.extend((item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value)
                        if isinstance(item, (dict, list, str)))
        elif isinstance(value, str) and not _is_text(value):
            raise BadRequest(f"{path} holds a lone UTF-16 surrogate (an escape like \\ud800 with no pair); "
                             "send valid Unicode", param=_root(path))


def _is_text(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _root(path: str) -> str:
    return path.split(".", 1)[0].split("[", 1)[0]


def _is_int_list(x) -> bool:
    return isinstance(x, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in x)


def check_ids(ids: list[int], vocab_size: int, what: str) -> list[int]:
    if not ids:
        raise BadRequest(f"{what} is empty; send at least one token", param=_root(what))
    bad = [t for t in ids if t < 0 or t >= vocab_size]
    if bad:
        raise BadRequest(f"{what} holds token id(s) {bad[:5]} outside the vocabulary [0, {vocab_size})",
                         param=_root(what))
    return ids


def _encode_all(tokenizer, texts: list[str]) -> list[list[int]]:
    """Texts to token ids in one tokenizer call (a batch call runs outside the interpreter lock)."""
    ids = tokenizer(texts, add_special_tokens=False).input_ids
    return [list(x) for x in ids]


def _prompt_list(value, name: str, *, text: bool, ids: bool) -> tuple[str, list, bool]:
    """The shape of a prompt field: (kind "text" or "ids", the prompts, batch). One token-id list is
    one prompt whatever its length; only a list of strings or of token-id lists is a batch."""
    if text and isinstance(value, str):
        return "text", [value], False
    if ids and _is_int_list(value) and value:
        return "ids", [value], False
    if isinstance(value, list) and value:
        if text and all(isinstance(p, str) for p in value):
            return "text", value, True
        if ids and all(_is_int_list(p) for p in value):
            return "ids", value, True
    raise BadRequest(_SHAPES[(text, ids)].format(name=name), param=name)


_SHAPES = {(True, True): "{name} must be a string, a list of strings, a list of token ids, or a list of such lists",
           (False, True): "{name} must be a non-empty list of token ids or a list of such lists",
           (True, False): "{name} must be a string or a non-empty list of strings"}


def _prompts(value, name: str, ctx: ParseContext, *, text: bool = True, ids: bool = True) -> tuple[list[list[int]], bool]:
    """A prompt field to token-id prompts, checked in the documented order: shape (400), count
    (413), size and context from the text's length in bytes before tokenising, then the ids."""
    kind, items, batch = _prompt_list(value, name, text=text, ids=ids)
    names = [f"{name}[{i}]" for i in range(len(items))] if batch else [name]
    if len(items) > ctx.max_prompts:
        raise Rejected(f"{name} holds {len(items)} prompts; this server takes at most {ctx.max_prompts} in one "
                       "request (--max-prompts-per-request); split it", 413, "too_many_prompts", param=name)
    if kind == "ids":
        return [check_ids(p, ctx.vocab_size, n) for p, n in zip(items, names)], batch
    for t, n in zip(items, names):
        if not t:
            raise BadRequest(f"{n} is empty; send some text", param=name)
    _precheck_text_length(items, names, name, ctx)
    return _encode_all(ctx.tokenizer, items), batch


def _precheck_text_length(texts: list[str], names: list[str], field: str, ctx: ParseContext) -> None:
    """Refuse texts that cannot fit from their length in bytes alone (see max_token_bytes)."""
    per, context = ctx.max_token_bytes, ctx.context_len
    if not per or not context:
        return
    sizes = [len(t.encode("utf-8")) for t in texts]
    least = [-(-b // per) for b in sizes]  # tokens each text holds at the very least
    work = sum(min(n, context) for n in least)
    if ctx.max_queued_tokens and work > ctx.max_queued_tokens:
        raise Rejected(f"{field} holds at least {work} tokens of prompts but the server admits at most "
                       f"{ctx.max_queued_tokens} at a time; split the request", 413, "too_many_tokens", param=field)
    for name, size, n in zip(names, sizes, least):
        if n >= context:
            raise BadRequest(f"{name} has {size} bytes, at least {n} tokens, but the model's context is {context}; "
                             "shorten the prompt", param=field)


def check_stop(stop, where: str, param: str) -> None:
    """`stop`: a string or a list of at most MAX_STOP_STRINGS strings (a dict's keys are no stop list)."""
    if stop is None or isinstance(stop, str):
        return
    if not isinstance(stop, list) or not all(isinstance(x, str) for x in stop):
        raise BadRequest(f"{where} must be a string or a list of strings, got {type(stop).__name__}", param=param)
    if len(stop) > MAX_STOP_STRINGS:
        raise BadRequest(f"{where} holds {len(stop)} strings; at most {MAX_STOP_STRINGS} are accepted", param=param)


# Every field each endpoint reads; anything else is refused by name rather than silently ignored.
_SAMPLING_FIELDS = {"model", "max_tokens", "temperature", "top_p", "top_k", "seed", "stop", "stop_token_ids",
                    "stream", "stream_options", "ignore_eos", "n", "user", "logprobs", "presence_penalty",
                    "frequency_penalty", "logit_bias", "min_p", "min_tokens", "repetition_penalty",
                    "skip_special_tokens", "service_tier", "metadata", "store"}
COMPLETION_FIELDS = frozenset(_SAMPLING_FIELDS | {"prompt", "best_of", "echo", "suffix"})
CHAT_FIELDS = frozenset(_SAMPLING_FIELDS | {
    "messages", "max_completion_tokens", "top_logprobs", "response_format", "tools", "tool_choice",
    "parallel_tool_calls", "functions", "function_call", "modalities", "audio", "prediction", "reasoning_effort",
    "web_search_options"})
GENERATE_FIELDS = frozenset({"text", "input_ids", "sampling_params", "stream", "rid", "return_logprob", "model"})

# (field, value is unsupported, what to say); a field at its neutral value is accepted.
_UNSUPPORTED = (
    ("n", lambda v: v not in (None, 1), "only n=1 is supported; send several requests instead"),
    ("best_of", lambda v: v not in (None, 1), "best_of is not supported"),
    ("echo", lambda v: v not in (None, False), "echo is not supported"),
    ("suffix", lambda v: v not in (None, ""), "suffix is not supported"),
    ("presence_penalty", lambda v: v not in (None, 0), "presence_penalty is not supported; leave it at 0"),
    ("frequency_penalty", lambda v: v not in (None, 0), "frequency_penalty is not supported; leave it at 0"),
    ("repetition_penalty", lambda v: v not in (None, 1), "repetition_penalty is not supported; leave it at 1"),
    ("min_p", lambda v: v not in (None, 0), "min_p is not supported; leave it at 0"),
    ("min_tokens", lambda v: v not in (None, 0), "min_tokens is not supported; leave it at 0"),
    ("skip_special_tokens", lambda v: v not in (None, True), "special tokens are always skipped in the text"),
    ("logit_bias", lambda v: v not in (None, {}), "logit_bias is not supported"),
    ("tools", lambda v: v not in (None, []), "tools are not supported by this engine"),
    ("functions", lambda v: v not in (None, []), "functions are not supported by this engine"),
    ("tool_choice", lambda v: v not in (None, "none", "auto"), "tools are not supported by this engine"),
    ("function_call", lambda v: v not in (None, "none", "auto"), "functions are not supported by this engine"),
    ("parallel_tool_calls", lambda v: not isinstance(v, (bool, type(None))), "parallel_tool_calls must be true or false"),
    ("response_format", lambda v: v not in (None, {"type": "text"}),
     "only response_format {\"type\": \"text\"} is supported; JSON mode and schemas are not"),
    ("modalities", lambda v: v not in (None, ["text"]), "only the text modality is supported"),
    ("audio", lambda v: v is not None, "audio output is not supported"),
    ("prediction", lambda v: v is not None, "predicted outputs are not supported"),
    ("reasoning_effort", lambda v: v is not None, "reasoning_effort is not supported by this model"),
    ("web_search_options", lambda v: v is not None, "web search is not supported"),
    ("store", lambda v: v not in (None, False), "this server stores nothing; leave store false"),
    ("metadata", lambda v: v not in (None, {}), "metadata is only kept with store=true, which this server lacks"),
    ("service_tier", lambda v: v not in (None, "auto", "default"), "only the default service tier exists here"),
    ("user", lambda v: not isinstance(v, (str, type(None))), "user must be a string"),
)


def _check_fields(body: dict, known: frozenset, endpoint: str) -> None:
    unknown = sorted(k for k in body if k not in known)
    if unknown:
        raise BadRequest(f"unknown field(s) {unknown} for {endpoint}; it accepts {sorted(known)}", param=unknown[0])
    for key, bad, message in _UNSUPPORTED:
        if key in body and bad(body[key]):
            raise BadRequest(f"{key}={body[key]!r}: {message}", param=key)


def check_model(body: dict, ctx: ParseContext) -> None:
    model = body.get("model")
    if model is None or not ctx.model_names:
        return
    if not isinstance(model, str):
        raise BadRequest("model must be a string", param="model")
    if model not in ctx.model_names:
        raise BadRequest(f"the model {model!r} is not served here; use {ctx.model_names[0]!r} (see /v1/models)",
                         status=404, param="model")


def _flag(body: dict, key: str, default: bool = False) -> bool:
    """A JSON boolean (or null/absent: the default); "no", 0 and friends are refused, not guessed."""
    value = body.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise BadRequest(f"{key} must be true or false, got {value!r}", param=key)
    return value


def _count(value, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"{field} must be an integer from 0 to {MAX_TOP_LOGPROBS} (top alternatives per token), "
                         f"got {value!r}", param=field)
    if not 0 <= value <= MAX_TOP_LOGPROBS:
        raise BadRequest(f"{field}={value}: at most {MAX_TOP_LOGPROBS} top alternatives per token are returned "
                         f"(OpenAI's cap); ask for 0 to {MAX_TOP_LOGPROBS}", param=field)
    return value


def completion_count(body: dict) -> int | None:
    """Completions' `logprobs`: None (not asked; null or false, which clients send) or the number of top
    alternatives (0: the chosen token's only)."""
    value = body.get("logprobs")
    return None if value is None or value is False else _count(value, "logprobs")


def chat_count(body: dict) -> int | None:
    """Chat's `logprobs` (true/false) and `top_logprobs` (needs logprobs true, as OpenAI's)."""
    asked, top = body.get("logprobs"), body.get("top_logprobs")
    if asked is not None and not isinstance(asked, bool):
        raise BadRequest(f"logprobs must be true or false in chat (top_logprobs gives the count), got {asked!r}",
                         param="logprobs")
    if top is not None:
        top = _count(top, "top_logprobs")
        if not asked and top:
            raise BadRequest("top_logprobs needs logprobs: true", param="top_logprobs")
    return (top or 0) if asked else None


def _openai_sampling(body: dict, default_max_tokens: int, logprobs: int | None = None) -> SamplingParams:
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    stop = body.get("stop")
    check_stop(stop, "stop", "stop")
    stop_ids = body.get("stop_token_ids")
    if stop_ids is not None and not isinstance(stop_ids, list):
        raise BadRequest("stop_token_ids must be a list of token ids", param="stop_token_ids")
    values = {
        "max_new_tokens": default_max_tokens if max_tokens is None else max_tokens,
        "temperature": 1.0 if body.get("temperature") is None else body["temperature"],
        "top_p": 1.0 if body.get("top_p") is None else body["top_p"],
        "top_k": -1 if body.get("top_k") is None else body["top_k"],  # an extension, as vLLM/SGLang
        "seed": body.get("seed"),
        "stop": () if stop is None else stop,
        "stop_token_ids": stop_ids or (),
        "ignore_eos": _flag(body, "ignore_eos"),
        "logprobs": logprobs,
    }
    return _make_params(values)


_PARAM_NAMES = {"max_new_tokens": "max_tokens"}  # what the OpenAI client calls our fields


def _make_params(values: dict) -> SamplingParams:
    try:
        return SamplingParams(**values)
    except InvalidSamplingParams as err:
        raise BadRequest(str(err), param=_param_of(str(err))) from None
    except TypeError as err:  # wrong types that the dataclass itself trips on
        raise BadRequest(f"bad sampling parameter: {err}") from None


def _param_of(message: str) -> str | None:
    first = message.split(" ", 1)[0]
    return _PARAM_NAMES.get(first, first) if first.isidentifier() else None


def _stream_flags(body: dict) -> tuple[bool, bool, bool]:
    """(stream, include_usage, continuous_usage_stats): vLLM's option, usage on every chunk."""
    stream = _flag(body, "stream")
    options = body.get("stream_options")
    if options is None:
        return stream, False, False
    if not isinstance(options, dict):
        raise BadRequest("stream_options must be an object", param="stream_options")
    unknown = sorted(set(options) - {"include_usage", "continuous_usage_stats"})
    if unknown:
        raise BadRequest(f"stream_options: unknown option(s) {unknown}; only include_usage and "
                         "continuous_usage_stats are supported", param="stream_options")
    include, continuous = _flag(options, "include_usage"), _flag(options, "continuous_usage_stats")
    if continuous and not include:
        raise BadRequest("stream_options: continuous_usage_stats needs include_usage true as well",
                         param="stream_options")
    return stream, include, continuous


def completion_work(body: dict, ctx: ParseContext) -> Work:
    """`/v1/completions`: prompt is a string, a list of strings, a token list or a list of them."""
    _check_fields(body, COMPLETION_FIELDS, "/v1/completions")
    check_model(body, ctx)
    prompt = body.get("prompt")
    if prompt is None:
        raise BadRequest("prompt is missing", param="prompt")
    prompts, batch = _prompts(prompt, "prompt", ctx)
    params = _openai_sampling(body, COMPLETION_DEFAULT_MAX_TOKENS, completion_count(body))
    stream, usage, continuous = _stream_flags(body)
    return Work(prompts, [params] * len(prompts), batch, stream, usage, continuous,
                max_tokens_given=body.get("max_tokens") is not None)


def _message_text(message, i: int) -> dict:
    if not isinstance(message, dict) or "role" not in message:
        raise BadRequest(f"messages[{i}] must be an object with a role and content", param="messages")
    role = message["role"]
    if not isinstance(role, str) or not role:
        raise BadRequest(f"messages[{i}].role must be a non-empty string", param="messages")
    unknown = sorted(set(message) - {"role", "content", "name"})
    if unknown:
        raise BadRequest(f"messages[{i}]: unsupported key(s) {unknown} (tool calls and audio are not supported)",
                         param="messages")
    content = message.get("content")
    if content is None:
        content = ""
    if isinstance(content, list):
        parts = []
        for j, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise BadRequest(f"messages[{i}].content[{j}]: only text parts {{\"type\": \"text\", \"text\": ...}} "
                                 "are supported", param="messages")
            parts.append(part["text"])
        content = "".join(parts)
    if not isinstance(content, str):
        raise BadRequest(f"messages[{i}].content must be a string or a list of text parts", param="messages")
    out = {"role": role, "content": content}
    if message.get("name") is not None:  # handed to the chat template, which may use it
        if not isinstance(message["name"], str):
            raise BadRequest(f"messages[{i}].name must be a string", param="messages")
        out["name"] = message["name"]
    return out


def chat_work(body: dict, ctx: ParseContext) -> Work:
    """`/v1/chat/completions`: the messages through the tokenizer's own chat template."""
    _check_fields(body, CHAT_FIELDS, "/v1/chat/completions")
    check_model(body, ctx)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list of {role, content} objects", param="messages")
    messages = [_message_text(m, i) for i, m in enumerate(messages)]
    tokenizer = ctx.tokenizer
    if not getattr(tokenizer, "chat_template", None):
        raise BadRequest("this model's tokenizer has no chat template; use /v1/completions instead", param="messages")
    try:
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    except Exception as err:  # noqa: BLE001 - template errors are the client's messages
        raise BadRequest(f"the chat template could not render these messages: {err}", param="messages") from None
    if isinstance(ids, dict) or hasattr(ids, "input_ids"):  # transformers 5 may return a BatchEncoding
        ids = ids["input_ids"]
    params = _openai_sampling(body, CHAT_DEFAULT_MAX_TOKENS, chat_count(body))
    stream, usage, continuous = _stream_flags(body)
    given = body.get("max_tokens") is not None or body.get("max_completion_tokens") is not None
    return Work([list(ids)], [params], False, stream, usage, continuous, max_tokens_given=given)


def generate_work(body: dict, ctx: ParseContext) -> Work:
    """SGLang's `/generate`: `text` or `input_ids` (one or a batch), `sampling_params` (one or per item)."""
    _check_fields(body, GENERATE_FIELDS, "/generate")
    check_model(body, ctx)
    has_text, has_ids = body.get("text") is not None, body.get("input_ids") is not None
    if has_text == has_ids:
        raise BadRequest("send exactly one of text or input_ids", param="text" if has_text else "input_ids")
    if has_ids:
        prompts, batch = _prompts(body["input_ids"], "input_ids", ctx, text=False)
    else:
        prompts, batch = _prompts(body["text"], "text", ctx, ids=False)
    raw = body.get("sampling_params") or {}
    if isinstance(raw, list):
        if len(raw) != len(prompts):
            raise BadRequest(f"sampling_params has {len(raw)} entries for {len(prompts)} prompts",
                             param="sampling_params")
        params = [_generate_params(p) for p in raw]
    else:
        params = [_generate_params(raw)] * len(prompts)
    if _flag(body, "return_logprob"):
        raise BadRequest("return_logprob is not supported by this engine", param="return_logprob")
    stream = _stream_flags(body)[0]
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
    check_stop(raw.get("stop"), "sampling_params: stop", "sampling_params")
    if "logprobs" in raw:  # an engine field SGLang's sampling_params lacks; /generate shows no logprobs
        raise BadRequest("sampling_params: logprobs is not a /generate parameter; ask /v1/completions with "
                         "logprobs: N (or chat with logprobs: true, top_logprobs: N)", param="sampling_params")
    try:
        return SamplingParams.from_dict(raw)
    except InvalidSamplingParams as err:
        raise BadRequest(f"sampling_params: {err}", param="sampling_params") from None
    except TypeError as err:
        raise BadRequest(f"sampling_params: {err}", param="sampling_params") from None
