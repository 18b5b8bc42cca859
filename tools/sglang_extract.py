"""Read the facts the SGLang rule profiles encode out of one release's source (stdlib only).

A *probe* names where a fact lives (candidate files and functions, newest layout first) and which
statement of that function to keep. `WheelSource` finds the probes in a downloaded wheel;
`FixtureSource` reads the small snippets `sglang_facts.py --write-fixtures` saved from it, so the
tests run the same extractors on committed text instead of whole wheels. Every fact comes back with
the file and line it was read from (paths as in the SGLang repository: python/sglang/srt/...).
"""

from __future__ import annotations

import ast
import re
import textwrap
import zipfile
from dataclasses import dataclass
from pathlib import Path

REPO_PREFIX = "python/"  # wheel paths start at sglang/; the repository keeps them under python/


@dataclass(frozen=True)
class Snippet:
    path: str  # python/sglang/srt/...
    first_line: int  # line number of the snippet's first line in that file
    text: str

    def line_of(self, needle: str) -> int:
        for offset, line in enumerate(self.text.splitlines()):
            if needle in line:
                return self.first_line + offset
        raise LookupError(f"{needle!r} not in {self.path} snippet")

    def tree(self) -> ast.AST:
        return ast.parse(textwrap.dedent(self.text))

    def at(self, node: ast.AST) -> int:
        return self.first_line + node.lineno - 1


@dataclass(frozen=True)
class Fact:
    value: object
    path: str
    line: int

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class Probe:
    key: str
    candidates: tuple[tuple[str, str], ...]  # (file under sglang/srt, "func" or "Class.func"); first found wins
    statement: str | None = None  # keep only the outermost if-statement whose text contains this
    search: str | None = None  # or: keep the lines around the first line containing this text
    before: int = 2  # ... from this many lines above it
    after: int = 2  # ... to this many lines below it
    # or: one small window per line containing this text, from the `model_arch` test above it (the
    # branches of a long if/elif chain, without the chain); snippets(key) gives them all
    windows: str | None = None


_S = "sglang/srt/"
PROBES: tuple[Probe, ...] = (
    Probe("extra_buffer_validate", ((_S + "arg_groups/mamba_hook.py", "validate_mamba_extra_buffer"),
                                    (_S + "server_args.py", "ServerArgs._validate_mamba_extra_buffer"))),
    Probe("extra_buffer_platform_gate", ((_S + "arg_groups/mamba_hook.py", "_platform_supports_mamba_cache_extra_buffer"),)),
    Probe("supports_extra_buffer", ((_S + "arg_groups/overrides.py", "supports_mamba_cache_extra_buffer"),)),
    Probe("auto_resolution", ((_S + "arg_groups/overrides.py", "_mamba_radix_cache_resolution"),)),
    Probe("no_buffer_validate", ((_S + "arg_groups/mamba_hook.py", "validate_mamba_no_buffer"),
                                 (_S + "server_args.py", "ServerArgs._validate_mamba_no_buffer"))),
    Probe("mamba_strategy_handler", ((_S + "arg_groups/model_hook.py", "handle_mamba_radix_cache"),
                                     (_S + "server_args.py", "ServerArgs._handle_mamba_radix_cache"))),
    Probe("triton_v_head_dim", ((_S + "layers/attention/triton_backend.py", "TritonAttnBackend.__init__"),),
          statement="self.v_head_dim ="),
    Probe("intel_xpu_page", ((_S + "arg_groups/overrides.py", "_intel_xpu_page_constraint"),)),
    Probe("memory_by_capacity", ((_S + "arg_groups/memory_hook.py", "handle_gpu_memory_settings"),
                                 (_S + "server_args.py", "ServerArgs._handle_gpu_memory_settings")),
          statement="gpu_mem < 20 * 1024"),
    Probe("memory_reserve", ((_S + "arg_groups/memory_hook.py", "handle_gpu_memory_settings"),
                             (_S + "server_args.py", "ServerArgs._handle_gpu_memory_settings")),
          statement="activation_tokens * 1.5"),
    Probe("graph_reserve", ((_S + "arg_groups/memory_hook.py", "reserve_for_graph_mb"),
                            (_S + "server_args.py", "ServerArgs.reserve_for_graph_mb"))),
    Probe("prefill_graph_default", ((_S + "model_executor/cuda_graph_config.py", "default_prefill_backend"),)),
    Probe("mamba_ratio", ((_S + "mem_cache/kv_cache_configurator.py", "KVCacheConfigurator._calculate_mamba_ratio"),)),
    Probe("triton_refused", ((_S + "arg_groups/model_hook.py", "handle_model_specific_adjustments"),
                             (_S + "server_args.py", "ServerArgs._handle_model_specific_adjustments")),
          windows="does not support triton attention backend"),
    Probe("xpu_decode_graph", ((_S + "arg_groups/platform_hook.py", ""), (_S + "server_args.py", "")),
          search="Decode graph is opt-in on XPU"),
    Probe("xpu_causal_conv1d", ((_S + "layers/attention/mamba/mamba.py", ""),), search="elif is_xpu():"),
    Probe("linear_attn_backends", ((_S + "arg_groups/choices.py", "LINEAR_ATTN_KERNEL_BACKEND_CHOICES"),
                                   (_S + "server_args.py", "LINEAR_ATTN_KERNEL_BACKEND_CHOICES"))),
    Probe("gdn_blackwell", ((_S + "layers/attention/attention_registry.py", ""),),
          search="backends are supported on Blackwell GPUs for hybrid GDN models", before=16, after=7),
    Probe("gdn_sm100_backends", ((_S + "layers/attention/attention_registry.py", "HYBRID_GDN_SM100_BACKENDS"),)),
    Probe("graph_bs_running_cap", ((_S + "arg_groups/memory_hook.py", ""),),
          search="decode_cuda_graph_config.max_bs > cfg.max_running_requests"),
    Probe("scheduler_strategy_alias", ((_S + "server_args.py", ""),), search='"--mamba-scheduler-strategy"'),
)
PROBE = {p.key: p for p in PROBES}


def _find_def(tree: ast.AST, qualname: str):
    parts = qualname.split(".")
    scope = tree.body
    node = None
    for name in parts:
        node = next((n for n in scope if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == name), None)
        if node is None:
            if len(parts) == 2 and name == parts[-1]:  # the method may live in any class of the file
                for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
                    node = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name), None)
                    if node:
                        break
            if node is None:
                return None
        scope = getattr(node, "body", [])
    return node


def _windows(path: str, source: str, probe: Probe, func: str) -> list[Snippet]:
    lines = source.splitlines()
    node = _find_def(ast.parse(source), func)
    if node is None:
        return []
    out = []
    for i in range(node.lineno - 1, node.end_lineno):
        if probe.windows in lines[i]:
            start = next((j for j in range(i, max(node.lineno - 1, i - 15), -1) if "model_arch" in lines[j]
                          and lines[j].lstrip().startswith(("if ", "elif "))), i)
            end = i
            while end + 1 < len(lines) and not lines[end].rstrip().endswith(")"):
                end += 1
            out.append(Snippet(REPO_PREFIX + path, start + 1, "\n".join(lines[start:end + 1]) + "\n"))
    return out


def _cut(path: str, source: str, probe: Probe, func: str) -> Snippet | None:
    lines = source.splitlines()
    repo_path = REPO_PREFIX + path
    if probe.search:
        for i, line in enumerate(lines):
            if probe.search in line:
                start = max(0, i - probe.before)
                return Snippet(repo_path, start + 1, "\n".join(lines[start:i + probe.after + 1]) + "\n")
        return None
    tree = ast.parse(source)
    node = _find_def(tree, func)
    if node is None:  # or a module-level constant of that name
        node = next((n for n in tree.body if isinstance(n, ast.Assign) and len(n.targets) == 1
                     and isinstance(n.targets[0], ast.Name) and n.targets[0].id == func), None)
    if node is None:
        return None
    start = (node.decorator_list[0].lineno if getattr(node, "decorator_list", None) else node.lineno)
    if probe.statement:
        for sub in ast.walk(node):  # breadth first: the outermost matching if-statement
            if isinstance(sub, ast.If):
                seg = "\n".join(lines[sub.lineno - 1:sub.end_lineno])
                if probe.statement in seg:
                    return Snippet(repo_path, sub.lineno, seg + "\n")
        return None
    return Snippet(repo_path, start, "\n".join(lines[start - 1:node.end_lineno]) + "\n")


def _message_windows(files: dict[str, str], texts: list[str]) -> list[Snippet]:
    """The first line (files in path order) holding each text, as a one-line snippet."""
    out = []
    for text in texts:
        for path in sorted(files):
            lines = files[path].splitlines()
            hit = next((i for i, line in enumerate(lines) if text in line), None)
            if hit is not None:
                out.append(Snippet(REPO_PREFIX + path, hit + 1, lines[hit] + "\n"))
                break
    return out


class WheelSource:
    """The probes' snippets, cut from a wheel (or an unpacked wheel folder)."""

    def __init__(self, wheel: str | Path):
        self.wheel = Path(wheel)
        self._files: dict[str, str] = {}

    def _read(self, path: str) -> str | None:
        if path not in self._files:
            if self.wheel.is_dir():
                f = self.wheel / path
                self._files[path] = f.read_text(encoding="utf-8") if f.is_file() else None
            else:
                with zipfile.ZipFile(self.wheel) as z:
                    try:
                        self._files[path] = z.read(path).decode("utf-8")
                    except KeyError:
                        self._files[path] = None
        return self._files[path]

    def snippet(self, key: str) -> Snippet | None:
        probe = PROBE[key]
        for path, func in probe.candidates:
            text = self._read(path)
            if text is not None:
                found = _cut(path, text, probe, func)
                if found:
                    return found
        return None

    def all_sources(self) -> dict[str, str]:
        """Every .py file under sglang/srt (the message scan)."""
        if self.wheel.is_dir():
            return {str(f.relative_to(self.wheel)): f.read_text(encoding="utf-8", errors="replace")
                    for f in sorted((self.wheel / _S).rglob("*.py"))}
        with zipfile.ZipFile(self.wheel) as z:
            return {n: z.read(n).decode("utf-8", errors="replace") for n in z.namelist()
                    if n.startswith(_S) and n.endswith(".py")}

    def message_windows(self, texts: list[str]) -> list[Snippet]:
        return _message_windows(self.all_sources(), texts)

    def snippets(self, key: str) -> list[Snippet]:
        probe = PROBE[key]
        for path, func in probe.candidates:
            text = self._read(path)
            if text is not None:
                found = _windows(path, text, probe, func)
                if found:
                    return found
        return []


_HEADER = re.compile(r"^# sglang snippet: (?P<path>\S+) from line (?P<line>\d+)$")


def fixture_text(s: Snippet) -> str:
    return f"# sglang snippet: {s.path} from line {s.first_line}\n{s.text}"


class FixtureSource:
    """Snippets saved as tests/data/sglang/<version>/<probe>.py (a missing file: not in that release)."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)

    def snippet(self, key: str) -> Snippet | None:
        f = self.folder / f"{key}.py"
        if not f.is_file():
            return None
        head, _, body = f.read_text(encoding="utf-8").partition("\n")
        m = _HEADER.match(head)
        if not m:
            raise ValueError(f"{f}: first line must be '# sglang snippet: PATH from line N'")
        return Snippet(m["path"], int(m["line"]), body)

    def message_windows(self, texts: list[str]) -> list[Snippet]:
        return self.snippets("messages")

    def snippets(self, key: str) -> list[Snippet]:
        """Several snippets saved in one file, each under its own header line."""
        f = self.folder / f"{key}.py"
        if not f.is_file():
            return []
        found, head, body = [], None, []
        for line in f.read_text(encoding="utf-8").splitlines(keepends=True):
            m = _HEADER.match(line.rstrip("\n"))
            if m:
                if head:
                    found.append(Snippet(head["path"], int(head["line"]), "".join(body)))
                head, body = m, []
            else:
                body.append(line)
        if head:
            found.append(Snippet(head["path"], int(head["line"]), "".join(body)))
        return found


# --- the extractors -------------------------------------------------------------------------------

_PLATFORM = {"is_cuda": "cuda", "is_musa": "musa", "is_npu": "npu", "is_hip": "rocm", "is_xpu": "xpu"}


def _platforms(node: ast.AST) -> tuple[str, ...]:
    names = set()
    for sub in ast.walk(node):
        name = sub.attr if isinstance(sub, ast.Attribute) else sub.id if isinstance(sub, ast.Name) else None
        if name in _PLATFORM:
            names.add(_PLATFORM[name])
    return tuple(sorted(names))


def _string(node: ast.AST) -> str | None:
    """A constant string, or the text of an f-string with its fields as {expr}."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        out = []
        for v in node.values:
            out.append(v.value if isinstance(v, ast.Constant) else "{" + ast.unparse(v.value) + "}")
        return "".join(out)
    return None


def extra_buffer_platform(src) -> dict[str, Fact]:
    s = src.snippet("extra_buffer_validate")
    gate = src.snippet("extra_buffer_platform_gate")
    arch = next(n for n in ast.walk(s.tree()) if isinstance(n, ast.Assert) and n.msg is not None
                and (_string(n.msg) or "").startswith("extra_buffer is not supported"))
    arch_text = re.sub(r"\{[^}]*\}", "{arch}", _string(arch.msg))
    for node in ast.walk(s.tree()):
        if isinstance(node, ast.Assert) and node.msg is not None:
            text = _string(node.msg)
            if text and not text.startswith("extra_buffer is not supported"):
                platforms = _platforms(gate.tree()) if gate else _platforms(node.test)
                where = (gate.path, gate.first_line) if gate else (s.path, s.at(node.msg))
                return {
                    "extra_buffer_arch_message": Fact(arch_text, s.path, s.at(arch.msg)),
                    "extra_buffer_platforms": Fact(platforms, *where),
                    "extra_buffer_platform_message": Fact(text, s.path, s.at(node.msg)),
                }
    raise LookupError("no platform assert in the extra_buffer validator")


def supports_extra_buffer(src) -> dict[str, Fact]:
    s = src.snippet("supports_extra_buffer")
    tree = s.tree()
    xpu = next((n for n in ast.walk(tree) if isinstance(n, ast.If) and "is_xpu" in ast.unparse(n.test)), None)
    triton = next((n for n in ast.walk(tree) if isinstance(n, ast.Compare) and "linear_attn_backend" in ast.unparse(n)
                   and any(isinstance(c, ast.Constant) and c.value == "triton" for c in n.comparators)), None)
    return {
        "extra_buffer_refused_on_xpu": Fact(xpu is not None, s.path, s.at(xpu) if xpu else s.first_line),
        "extra_buffer_needs_triton_linear_backend": Fact(triton is not None, s.path, s.at(triton) if triton else s.first_line),
    }


def auto_resolution(src) -> dict[str, Fact]:
    """auto -> extra_buffer when (overlap wanted or page_size > 1) and supported, else no_buffer + overlap off."""
    s = src.snippet("auto_resolution")
    text = s.text
    rule = ("overlap_or_paging" if "wants_overlap" in text and "wants_paging" in text else "unknown")
    line = s.line_of("wants_overlap =") if rule != "unknown" else s.first_line
    return {"auto_strategy_rule": Fact(rule, s.path, line)}


def no_buffer_messages(src) -> dict[str, Fact]:
    s = src.snippet("no_buffer_validate")
    msgs = tuple(_string(n.msg) for n in ast.walk(s.tree()) if isinstance(n, ast.Assert) and n.msg is not None)
    return {"no_buffer_messages": Fact(msgs, s.path, s.first_line)}


def strategy_without_mamba(src) -> dict[str, Fact]:
    s = src.snippet("mamba_strategy_handler")
    try:
        return {"rejects_strategy_without_mamba": Fact(True, s.path, s.line_of("needs mamba state"))}
    except LookupError:
        return {"rejects_strategy_without_mamba": Fact(False, s.path, s.first_line)}


def triton_layer0(src) -> dict[str, Fact]:
    s = src.snippet("triton_v_head_dim")
    for node in ast.walk(s.tree()):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get_value_buffer"
                and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == 0):
            # Reached only when no hybrid branch above caught the model: mamba2 models fall through.
            hybrid = "mambaish_config" in s.text
            return {"triton_probes_layer0": Fact(not hybrid, s.path, s.at(node))}
    return {"triton_probes_layer0": Fact(False, s.path, s.line_of("mambaish_config("))}


def intel_xpu_page(src) -> dict[str, Fact]:
    """Run the function's assignments for a non-MLA and an MLA model to get both warnings as printed."""
    s = src.snippet("intel_xpu_page")
    fn = next(n for n in ast.walk(s.tree()) if isinstance(n, ast.FunctionDef))

    def run(body, env, mla):
        for st in body:
            if isinstance(st, ast.If):
                test = ast.unparse(st.test)
                if "use_mla_backend" in test:
                    run(st.body if mla else st.orelse, env, mla)
                elif "page_size not in" in test:
                    continue
                else:
                    env["prefill_counts"] = "prefill_backend" in test
                    run(st.body, env, mla)
            elif isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name):
                name = st.targets[0].id
                if isinstance(st.value, ast.BinOp):
                    env[name] = env[st.value.left.id] + st.value.right.value
                else:
                    try:
                        env[name] = ast.literal_eval(st.value)
                    except ValueError:
                        pass
            elif isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and getattr(st.value.func, "attr", "") == "extend":
                env[st.value.func.value.id] = env[st.value.func.value.id] + ast.literal_eval(st.value.args[0])
        return env

    warn = next(n for n in ast.walk(fn) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "warning")
    template = _string(warn.args[0])

    def render(mla):
        env = run(fn.body, {}, mla)
        text = template.replace("{msg}", env["msg"]).replace("{supported_page_sizes}", str(env["supported_page_sizes"]))
        return text.replace("{view.page_size}", "{old}"), env

    plain, env = render(False)
    mla, _ = render(True)
    line = s.at(warn)
    return {
        "intel_xpu_page_message": Fact(plain, s.path, line),
        "intel_xpu_page_message_mla": Fact(mla, s.path, line),
        "intel_xpu_snaps_on_prefill_backend": Fact(bool(env.get("prefill_counts")), s.path, s.first_line + 1),
    }


def _rung(body: list) -> tuple:
    chunk, bs = None, []
    for sub in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(sub, ast.keyword) and sub.arg == "chunked_prefill_size":
            chunk = sub.value.value
        elif isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Constant):
            target = ast.unparse(sub.targets[0])
            if target.endswith("chunked_prefill_size"):
                chunk = sub.value.value
            elif target.endswith("max_bs"):
                bs.append(sub.value.value)
    return chunk, bs[0], bs[-1]


def memory_by_capacity(src) -> dict[str, Fact]:
    """The gpu_mem ladder: ((below_gb or None, chunked_prefill_size, decode max_bs tp<4, tp>=4), ...)."""
    s = src.snippet("memory_by_capacity")
    outer = s.tree().body[0]  # if gpu_mem is not None:
    node = next(n for n in outer.body if isinstance(n, ast.If) and "gpu_mem <" in ast.unparse(n.test))
    rungs = []
    while True:
        below = int(re.search(r"gpu_mem < (\d+) \* 1024", ast.unparse(node.test))[1])
        rungs.append((below, *_rung(node.body)))
        nxt = node.orelse
        if len(nxt) == 1 and isinstance(nxt[0], ast.If) and "gpu_mem <" in ast.unparse(nxt[0].test):
            node = nxt[0]
            continue
        rungs.append((None, *_rung(nxt)))
        break
    return {"memory_ladder": Fact(tuple(rungs), s.path, s.line_of("gpu_mem < 20 * 1024"))}


def memory_reserve(src) -> dict[str, Fact]:
    s = src.snippet("memory_reserve")
    t = s.text
    base = int(re.search(r"reserved_mem = (\d+)\s*\n\s*reserved_mem \+= activation_tokens", t)[1])
    floor = re.search(r"gpu_mem > (\d+) \* 1024:\s*\n\s*reserved_mem = max\(reserved_mem, (\d+) \* 1024\)", t)
    xpu = re.search(r"if get_platform\(\)\.is_xpu:\s*\n\s*reserved_mem \+= (\d+) \* 1024", t)
    no_gpu = re.search(r"else ([\d.]+)\s*\n", t)
    return {
        "reserve_base_mb": Fact(base, s.path, s.line_of("reserved_mem += activation_tokens") - 1),
        "reserve_floor": Fact((int(floor[1]) * 1024, int(floor[2]) * 1024), s.path, s.line_of("reserved_mem = max(reserved_mem")),
        "xpu_extra_reserve_mb": Fact(int(xpu[1]) * 1024 if xpu else 0, s.path,
                                     s.line_of("reserved_mem += 2 * 1024") if xpu else s.first_line),
        "mem_fraction_without_gpu_mem": Fact(float(no_gpu[1]) if no_gpu else None, s.path,
                                             s.line_of(f"else {no_gpu[1]}") if no_gpu else s.first_line),
    }


def graph_reserve(src) -> dict[str, Fact]:
    s = src.snippet("graph_reserve")
    t = s.text
    decode = int(re.search(r"decode_cuda_graph_config\.max_bs \* (\d+)\n", t)[1])
    prefill = int(re.search(r"len\(prefill_cuda_graph_config\.bs\) \* (\d+)", t)[1])
    mla = float(re.search(r"reserved_mem \+= ([\d.]+) \* 1024", t)[1]) * 1024
    return {"graph_reserve_mb": Fact((decode, prefill, mla), s.path, s.first_line)}


def prefill_graph_default(src) -> dict[str, Fact]:
    s = src.snippet("prefill_graph_default")
    m = re.search(r"return Backend\.(\w+) if is_cuda\(\) else Backend\.(\w+)", s.text)
    return {"prefill_graph_default": Fact((m[1].lower(), m[2].lower()), s.path, s.line_of("return Backend."))}


def mamba_ratio(src) -> dict[str, Fact]:
    s = src.snippet("mamba_ratio")
    lazy = next(n for n in ast.walk(s.tree()) if isinstance(n, ast.Assert) and n.msg is not None)
    return {"mamba_ratio_rule": Fact("3 + tracking slots (2 overlap, 1 otherwise or lazy); 1 without radix",
                                     s.path, s.first_line),
            "lazy_overlap_message": Fact(_string(lazy.msg), s.path, s.at(lazy.msg))}


def scheduler_alias(src) -> dict[str, Fact]:
    s = src.snippet("scheduler_strategy_alias")
    if s is None:  # line 0: searched for and not found
        return {"scheduler_strategy_alias": Fact(False, REPO_PREFIX + _S + "server_args.py", 0)}
    return {"scheduler_strategy_alias": Fact(True, s.path, s.line_of('"--mamba-scheduler-strategy"'))}


def triton_refused(src) -> dict[str, Fact]:
    """The architectures whose model adjustments assert attention_backend != "triton", and the text
    (verbatim: the NemotronH one lacks a space after the comma), with {arch} for an f-string's arch."""
    found = []
    windows = src.snippets("triton_refused")
    for w in windows:
        archs = tuple(re.findall(r'"(\w+)"', re.search(r"model_arch in \[(.*?)\]", w.text, re.S)[1]))
        message = w.text[w.text.index('!= "triton"') + len('!= "triton"'):]
        text = "".join(re.findall(r'f?"((?:[^"\\]|\\.)*)"', message))
        text = text.replace("{model_arch}", "{arch}")
        found.append((archs, text))
    where = (windows[0].path, windows[0].first_line) if windows else (REPO_PREFIX + _S + "arg_groups/model_hook.py", 0)
    return {"triton_refused": Fact(tuple(found), *where)}


def xpu_decode_graph(src) -> dict[str, Fact]:
    """On XPU the decode cuda graph stays disabled unless --cuda-graph-backend-decode is given."""
    s = src.snippet("xpu_decode_graph")
    if s is None:  # line 0: searched for and not found
        return {"xpu_decode_graph_opt_in": Fact(False, REPO_PREFIX + _S + "arg_groups/platform_hook.py", 0)}
    return {"xpu_decode_graph_opt_in": Fact(True, s.path, s.line_of("Decode graph is opt-in on XPU"))}


def xpu_causal_conv1d(src) -> dict[str, Fact]:
    """mamba.py binds causal_conv1d_fn(_triton) on XPU (without it: NameError at the first prefill)."""
    s = src.snippet("xpu_causal_conv1d")
    if s is None:  # line 0: searched for and not found
        return {"xpu_causal_conv1d_bound": Fact(False, REPO_PREFIX + _S + "layers/attention/mamba/mamba.py", 0)}
    return {"xpu_causal_conv1d_bound": Fact(True, s.path, s.line_of("elif is_xpu():"))}


def linear_attn_backends(src) -> dict[str, Fact]:
    """--linear-attn-backend choices (argparse refuses anything else)."""
    s = src.snippet("linear_attn_backends")
    node = s.tree().body[0]
    return {"linear_attn_backends": Fact(tuple(ast.literal_eval(node.value)), s.path, s.first_line)}


def gdn_blackwell(src) -> dict[str, Fact]:
    """Attention backends a hybrid GDN model may use on Blackwell: (SM100 set, SM120 set), and whether
    the assert names one backend ("Got attention_backend=...") or the prefill/decode pair."""
    s = src.snippet("gdn_blackwell")
    sets = re.findall(r"allowed = (\{[^}]*\}|\w+)", s.text)
    sm120 = tuple(sorted(ast.literal_eval(sets[0])))
    if sets[1].startswith("{"):
        sm100 = tuple(sorted(ast.literal_eval(sets[1])))
    else:  # a named constant (HYBRID_GDN_SM100_BACKENDS)
        const = src.snippet("gdn_sm100_backends")
        sm100 = tuple(sorted(ast.literal_eval(const.tree().body[0].value)))
    form = "attention_backend" if "Got attention_backend=" in s.text else "prefill_decode"
    return {"gdn_blackwell_backends": Fact((sm100, sm120, form), s.path,
                                           s.line_of("backends are supported on Blackwell GPUs"))}


def graph_bs_running_cap(src) -> dict[str, Fact]:
    """A default decode cuda-graph max_bs above --max-running-requests is lowered to it."""
    s = src.snippet("graph_bs_running_cap")
    if s is None:  # line 0: searched for and not found
        return {"graph_max_bs_capped_by_running": Fact(False, REPO_PREFIX + _S + "arg_groups/memory_hook.py", 0)}
    return {"graph_max_bs_capped_by_running": Fact(True, s.path, s.line_of("max_bs > cfg.max_running_requests"))}


EXTRACTORS = (extra_buffer_platform, supports_extra_buffer, auto_resolution, no_buffer_messages, strategy_without_mamba,
              triton_layer0, intel_xpu_page, memory_by_capacity, memory_reserve, graph_reserve, prefill_graph_default,
              graph_bs_running_cap, xpu_decode_graph, xpu_causal_conv1d, linear_attn_backends, gdn_blackwell, mamba_ratio, scheduler_alias, triton_refused)


def catalogue_texts() -> list[str]:
    """The SGLang message fragments diagnosis knows (core/diagnosis/catalogue.py, `source_text`)."""
    from bringup.core.diagnosis.catalogue import PATTERNS

    return sorted({p.source_text for p in PATTERNS if p.source_text})


def messages(src, texts: list[str] | None = None) -> dict[str, str]:
    """text -> 'path:line' for each catalogue text this release's source holds (absent: not a key)."""
    texts = catalogue_texts() if texts is None else texts
    found = {}
    for w in src.message_windows(texts):
        for text in texts:
            if text in w.text and text not in found:
                found[text] = f"{w.path}:{w.first_line}"
    return dict(sorted(found.items()))


def extract(src) -> dict[str, Fact]:
    facts: dict[str, Fact] = {}
    for fn in EXTRACTORS:
        facts.update(fn(src))
    return facts
