"""The ``callmaybe`` command line, and the composition root: the one module that imports both the compiler and
the runtime. It parses flags, calls one library function per command, hands the runtime the compiler
(:func:`callmaybe.compiler.build.runtime_compiler`) for indexes it must build, and turns a library error into
one ``error:`` line and its exit code. Messages go through :mod:`callmaybe.core.messages`.
"""

from __future__ import annotations

import json
import math
import signal
import sys
from contextlib import contextmanager
from pathlib import Path

import click

from .core.errors import CallmaybeError, InputError, Interrupted
from .core.indexes import CACHE_BOUNDS
from .core.messages import say
from .core.malloc import fix_mmap_threshold, wants_fixed_threshold
from .core.registry import DEFAULT_MODEL, MODELS

DEFAULT_FUNCTIONS = Path("schemas/functions_definition.json")
DEFAULT_INPUT = Path("data/input/function_calling_tests.json")
DEFAULT_OUTPUT = Path("data/output/function_calling_results.json")
#: ``serve --prefill-share``'s default (see docs/compile.md, "Nineteenth session").
PREFILL_SHARE = 0.5
CALL_FORMAT_HELP = ("plain: a system message listing the catalog, then {\"name\", \"parameters\"}; tools: the chat "
                    "template's tools= support and the model's own call format (<tool_call> then {\"name\", "
                    "\"arguments\"}); auto: tools where the template supports it. --prompt-format is the "
                    "deprecated old name.")


@contextmanager
def signals_interrupt():
    """Within the block, SIGTERM raises :class:`~callmaybe.core.errors.Interrupted` (SIGINT already raises
    KeyboardInterrupt), so a run can keep its journal and say how to continue; the old handler comes back
    after."""

    def terminated(signum, frame):
        raise Interrupted(signum)

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def fail(exc: CallmaybeError) -> None:
    """Print ``exc`` as one ``error:`` line on stderr and exit with its code."""
    click.echo(f"error: {exc}", err=True)
    sys.exit(exc.exit_code)


@click.group()
@click.version_option(package_name="callmaybe")
def main() -> None:
    """Function calling with small language models whose output is valid by construction."""


def call_format_option(choices: list[str], default: str | None, help: str = CALL_FORMAT_HELP):
    """``--call-format`` with ``--prompt-format`` kept as a deprecated alias for one release."""
    return click.option("--call-format", "--prompt-format", "call_format", type=click.Choice(choices),
                        default=default, show_default=default is not None, help=help)


def resolve_call_format(call_format: str | None) -> str:
    """The call format of ``run``/``eval``: as given, else "plain" (Qwen2.5-Coder-1.5B's calls under "plain"
    were right on 92 of BFCL simple's first 100 under "auto", 87 under its tools format; with
    ``--parallel-calls``, on 70 of BFCL parallel's first 100 against 66, in 4.2 s per request against 5.1)."""
    if call_format is not None:
        return call_format
    return "plain"


def compile_limits_option():
    """``--compile-limits``: raise the bounds on the compiler's work (see :mod:`callmaybe.compiler.limits`)."""
    from .compiler.limits import CompileLimits, help_text

    def parse(ctx, param, value):
        try:
            return CompileLimits.parse(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None

    return click.option("--compile-limits", "compile_limits", default=None, metavar="NAME=N,...|Nx", callback=parse,
                        help=help_text())


@main.command("compile")
@click.argument("schemas", type=click.Path(path_type=Path))
@click.option("--tokenizer", "tokenizer", default="Qwen/Qwen3-0.6B", show_default=True,
              help="Built-in name (Qwen/Qwen3-0.6B, a registry model such as qwen2.5-coder-1.5b-instruct), "
                   "local tokenizer path or .gguf file, or hub id.")
@click.option("-o", "--output", "out_dir", type=click.Path(path_type=Path), default=Path("indexes"),
              show_default=True, help="Folder to write the index into.")
@click.option("--vocab-size", "--vocab-width", "vocab_size", type=click.IntRange(min=1), default=None,
              help="Logits per position (the model's vocabulary size) when the tokenizer does not say "
                   "(--vocab-width: the old name).")
@click.option("--strict", is_flag=True,
              help="Fail when some keyword is not enforced by the grammar (checked after generation) or unknown.")
@click.option("--explain", is_flag=True,
              help="Say, per function and parameter, which keywords the grammar enforces and which are checked "
                   "after generation, then stop (no index is written).")
@call_format_option(["plain", "tools"], "plain")
@compile_limits_option()
def compile_cmd(schemas: Path, tokenizer: str, out_dir: Path, vocab_size: int | None, strict: bool, explain: bool,
                call_format: str, compile_limits) -> None:
    """Compile a catalog (a file or a folder of them) into an index for a tokenizer."""
    import time

    from .compiler.build import build_index, check_strict, compile_notes, strict_notes
    from .compiler.explain import explain as explain_catalog
    from .core.callformat import compile_options
    from .core.catalog import load_catalog
    from .core.indexes import index_file_name
    from .core.vocabulary import load_vocabulary

    try:
        functions = load_catalog(schemas)
        if strict and not explain:  # what the grammar alone leaves, before the vocabulary is read
            check_strict(functions, compile_limits, schemas)
        t = time.perf_counter()
        vocabulary = load_vocabulary(tokenizer, vocab_size)
        say(f"vocabulary {tokenizer}: {len(vocabulary.token_bytes):,} tokens, vocabulary size "
            f"{vocabulary.vocab_size:,}, prepared in {time.perf_counter() - t:.2f} s")
        if explain:  # the whole compile's notes: the catalog's index may leave a long count to the check
            notes = compile_notes(functions, vocabulary, compile_options(call_format), schemas, compile_limits)
            for line in explain_catalog(functions, notes=notes):
                click.echo(line)
            if strict:
                strict_notes(notes, schemas)
            return
        name = schemas.stem if schemas.is_file() else schemas.resolve().name
        path = out_dir / index_file_name(name, tokenizer, call_format)
        build_index(functions, vocabulary, path, compile_options(call_format), source=schemas, limits=compile_limits,
                    strict=strict)
    except CallmaybeError as exc:
        fail(exc)


@main.command("match")
@click.option("--schema", "schema_path", type=click.Path(path_type=Path), default=None,
              help="A JSON schema (e.g. a function's parameters): texts are values.")
@click.option("--functions", "functions_path", type=click.Path(path_type=Path), default=None,
              help="A catalog (either spelling): texts are whole calls {\"name\": ..., \"parameters\": ...}.")
@click.option("--jsonl", "jsonl", type=click.Path(path_type=Path), default=None,
              help="A file with one text per line.")
@click.option("--strict", is_flag=True,
              help="Fail when some keyword is not enforced by the grammar (checked after generation) or unknown.")
@compile_limits_option()
@click.argument("texts", nargs=-1)
def match_cmd(schema_path, functions_path, jsonl, strict, compile_limits, texts) -> None:
    """Say which texts (canonical layout) the compiled grammar accepts, one JSON line each."""
    from .compiler.build import match_texts
    from .core.jsonio import read_text

    try:
        if (schema_path is None) == (functions_path is None):
            raise InputError("give exactly one of --schema FILE or --functions FILE")
        items = list(texts)
        if jsonl is not None:
            items += read_text(jsonl).rstrip("\n").split("\n")
        for line in match_texts(schema_path, functions_path, items, strict, compile_limits):
            click.echo(json.dumps(line, ensure_ascii=False))
    except CallmaybeError as exc:
        fail(exc)


@main.command("bench", context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.pass_context
def bench_cmd(ctx) -> None:
    """Compile, load and mask benchmark against the peers (bench/compile_bench.py), or with --e2e the end-to-end
    one (bench/e2e.py); their flags pass through. Runs from a source checkout only."""
    import runpy

    args = list(ctx.args)
    name = "compile_bench.py"
    if "--e2e" in args:
        args.remove("--e2e")
        name = "e2e.py"
    script = Path(__file__).resolve().parent / "bench" / name
    if not script.exists():
        fail(CallmaybeError("callmaybe bench runs from a source checkout (bench/ is not installed with the "
                            "package): run it there, e.g. `make bench`"))
    sys.argv = [str(script), *args]
    runpy.run_path(str(script), run_name="__main__")


@main.command("inspect")
@click.argument("index_path", type=click.Path(path_type=Path))
def inspect_cmd(index_path: Path) -> None:
    """Show what an index file holds: states, rows, sizes, fingerprints."""
    from .core.indexfile import describe

    try:
        for line in describe(index_path):
            click.echo(line)
    except CallmaybeError as exc:
        fail(exc)


def _not_nan(ctx, param, value: float) -> float:
    """A threshold compared with ``>=``: NaN would make every comparison false. Raises click.BadParameter."""
    if value != value:
        raise click.BadParameter("must be a number of nats, got nan")
    return value


def _finite(ctx, param, value: float) -> float:
    """A share or factor used in arithmetic: NaN and infinity pass click's ranges (NaN compares false with
    either bound) and failed later, in every forward pass that used them. Raises click.BadParameter."""
    if not math.isfinite(value):
        raise click.BadParameter(f"must be a finite number, got {value}")
    return value


def decision_options() -> list:
    """The options of the call-or-answer decision under tool_choice auto (run, eval, serve)."""
    from .runtime.policy.decision import CALL_LOG_ODDS_MIN, COMBINED_LOG_ODDS_MIN

    return [
        click.option("--call-threshold", type=float, default=CALL_LOG_ODDS_MIN, show_default=True,
                     callback=_not_nan,
                     help="Under tool_choice auto: the model calls when its log-odds (nats) of starting a call at "
                          "the first token reach this (runtime/policy/decision.py); lower calls more often."),
        click.option("--relevance-check/--no-relevance-check", default=True, show_default=True,
                     help="Under tool_choice auto: before a call the first token wants, ask the model whether a "
                          "function of the catalog does what the request asks; text when it doubts it."),
        click.option("--confirm-check/--no-confirm-check", default=True, show_default=True,
                     help="Under tool_choice auto: once a first call is decoded, show it to the model and ask whether "
                          "it does what the request asks; text when it doubts it (runtime/policy/confirm.py)."),
        click.option("--result-check/--no-result-check", default=True, show_default=True,
                     help="Under tool_choice auto, after a tool result: a declined turn answers without the catalog "
                          "and keeps that answer when it uses the result (its PMI with it, runtime/policy/"
                          "result_use.py); else it answers beside the catalog."),
        click.option("--value-check/--no-value-check", default=False, show_default=True,
                     help="Under tool_choice auto: decline a first call none of whose values the request states."),
        click.option("--combined-threshold", type=float, default=COMBINED_LOG_ODDS_MIN, show_default=True,
                     callback=_not_nan,
                     help="Under tool_choice auto: a first call that passed the first token, the relevance and the "
                          "confirm checks is declined when their three log-odds (nats) sum below this "
                          "(runtime/policy/decision.py); lower calls more often."),
    ]


def decision_options_decorator(f):
    """:func:`decision_options` applied to ``f`` (checked by :func:`_combined_checked`)."""
    f = _combined_checked(f)
    for option in reversed(decision_options()):
        f = option(f)
    return f


def _combined_checked(f):
    """``f``, where a ``--combined-threshold`` given while the relevance or the confirm check is off (the sum it
    bounds then has two terms or one, and the rule never runs) is a usage error instead of a setting without
    effect."""
    import functools

    @functools.wraps(f)
    def checked(*args, **kwargs):
        ctx = click.get_current_context()
        given = ctx.get_parameter_source("combined_threshold") != click.core.ParameterSource.DEFAULT
        if given and not (kwargs["relevance_check"] and kwargs["confirm_check"]):
            off = "--no-relevance-check" if not kwargs["relevance_check"] else "--no-confirm-check"
            raise click.UsageError(f"--combined-threshold has no effect with {off}: it bounds the sum of the first "
                                   "token's, the relevance check's and the confirm check's log-odds")
        return f(*args, **kwargs)

    return checked


SPECULATE_HELP = ("Where the model chooses a token inside a call, draft the tokens that follow the same words in "
                  "the prompt and verify them in one forward pass (prompt-lookup speculative decoding: "
                  "fewer passes, the same greedy output; a sampled turn never drafts).")


def run_options(f):
    """The options ``run`` and ``eval`` share (one RunConfig)."""
    options = [
        click.option("--model", default=DEFAULT_MODEL, show_default=True,
                     help=f"Registry name ({', '.join(MODELS)}), local checkpoint folder (may carry its own "
                          "indexes in callmaybe/*.safetensors) or hub id."),
        click.option("--max-tokens", type=click.IntRange(min=1), default=256, show_default=True,
                     help="Token budget per call."),
        click.option("--threads", type=click.IntRange(min=1), default=None,
                     help="torch CPU threads (default: torch's choice)."),
        call_format_option(["auto", "plain", "tools"], None,
                           CALL_FORMAT_HELP + " Default: plain."),
        click.option("--tool-choice", type=click.Choice(["required", "auto", "none"]), default="required",
                     show_default=True,
                     help="required: one call per request; auto: the model calls or answers in text (a declined "
                          "request is written {prompt, name: null, parameters: null, content}); none: text only."),
        click.option("--parallel-calls", is_flag=True,
                     help="Allow several calls per request; every entry then holds a calls list."),
        *decision_options(),
        click.option("--keep-unstated", is_flag=True,
                     help="Keep the model's value of every optional argument (default: one the request gives no "
                          "ground for, a placeholder, a copy from the catalog or a guess, is restated from the "
                          "request or left out; one the request states, reformats or names is kept)."),
        click.option("--dtype", type=click.Choice(["auto", "float32", "bfloat16", "int8", "int4"]), default="auto",
                     show_default=True,
                     help="Weights' dtype. auto: int8 on the CPU (int8 weights, rotated int8 activations: the "
                          "default model in 2.2 GB), bfloat16 on a GPU that computes it natively, else float32."),
        click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True,
                     help="auto: a CUDA GPU when torch sees one, else the CPU."),
        click.option("--max-batch", type=click.IntRange(min=1), default=1, show_default=True,
                     help="Decode up to N requests together, as rows of one forward pass (more requests per "
                          "second on many requests; 1: one at a time)."),
        click.option("--speculate/--no-speculate", default=True, show_default=True,
                     help=SPECULATE_HELP),
        click.option("--profile", "profile", is_flag=True,
                     help="Print where the answering time went: seconds, calls and tokens per phase."),
    ]
    f = _combined_checked(f)
    for option in reversed(options):
        f = option(f)
    return f


def ray_options(f):
    """``--ray [ADDRESS]`` and ``--ray-actors`` of ``run`` and ``eval`` (:mod:`callmaybe.scale.batch`)."""
    f = click.option("--ray-actors", type=click.IntRange(min=1), default=None,
                     help="With --ray: actors answering (each loads the model once and takes --threads CPUs, "
                          "default 1; default: as many as the cluster's CPUs hold).")(f)
    return click.option("--ray", "ray_address", is_flag=False, flag_value="", default=None, metavar="[ADDRESS]",
                        help="Answer on a Ray cluster (pip install 'callmaybe[ray]'): ADDRESS (auto, HOST:PORT, "
                             "ray://HOST:10001), else $RAY_ADDRESS or a local Ray; give it as --ray=ADDRESS or "
                             "last.")(f)


def ray_answering(ray_address: str | None, ray_actors: int | None, threads: int | None, config, kind: str):
    """What ``--ray`` asks for: None without it; else (after checking that Ray is installed: RayMissing, one
    line) the Ray answering of ``run`` (``kind`` "run") or ``eval`` ("eval"). Raises InputError for
    ``--ray-actors`` without ``--ray``, or an ADDRESS that is a file (an input taken for the address)."""
    if ray_address is None:
        if ray_actors is not None:
            raise InputError("--ray-actors needs --ray")
        return None
    if ray_address and Path(ray_address).exists():
        raise InputError(f"--ray took {ray_address!r} as the cluster's address: give the input before --ray, or "
                         "--ray=ADDRESS")
    from .compiler.build import runtime_compiler
    from .scale.batch import RayAnswering, RayPlan, ray_case_answers
    from .scale.cluster import require_ray

    require_ray()
    plan = RayPlan(ray_address, ray_actors, threads or 1)
    if kind == "run":
        return RayAnswering(config, runtime_compiler, plan)
    return ray_case_answers(config, runtime_compiler, plan)


def show_trace(record: dict) -> None:
    """Print one request's trace on stderr as soon as it is answered (above the progress bar)."""
    from .runtime.answering.runner import trace_lines

    say("\n".join(trace_lines(record)))


@main.command("eval")
@click.argument("data", type=click.Path(path_type=Path))
@run_options
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Only the first N cases (after --ids).")
@click.option("--ids", type=click.Choice(["even", "odd"]), default=None,
              help="Only the cases whose id ends with an even (odd) number (its position when it has none): "
                   "two halves, to tune on one and report the other.")
@click.option("--output", type=click.Path(path_type=Path), default=None,
              help="Write every case's call {id, prompt, name, parameters} (or error) here.")
@click.option("--text-tokens", type=click.IntRange(min=1), default=None,
              help="Cut a text answer after this many tokens (scored as no call; default 16): a call it writes "
                   "as text later is not seen.")
@ray_options
def eval_cmd(data, model, max_tokens, threads, call_format, tool_choice, parallel_calls, relevance_check,
             confirm_check, result_check, value_check, call_threshold, combined_threshold, keep_unstated, dtype, device, max_batch,
             speculate, profile, limit, ids, output, text_tokens, ray_address, ray_actors) -> None:
    """Score a data set with expected answers (a public-style folder or a BFCL cases.jsonl).

    A case whose catalog cannot be compiled, or whose answer failed, gets an error entry of its own; the others
    are answered and scored. Exit status: 0 every case answered; 1 some cases got an error entry; 2 bad input
    (one error line).
    """
    from .compiler.build import runtime_compiler
    from .runtime.evaluation.evaluate import evaluate
    from .runtime.answering.session import RunConfig

    if wants_fixed_threshold(max_batch, tool_choice):
        fix_mmap_threshold()  # a steady peak RSS (core/malloc.py)
    config = RunConfig(model=model, max_tokens=max_tokens, threads=threads,
                       call_format=resolve_call_format(call_format),
                       keep_unstated=keep_unstated, dtype=dtype, device=device, max_batch=max_batch,
                       tool_choice=tool_choice, parallel_calls=parallel_calls,
                       relevance_check=relevance_check, confirm_check=confirm_check, result_check=result_check,
                       evidence_check=value_check, call_threshold=call_threshold,
                       combined_threshold=combined_threshold, speculate=speculate, text_tokens=text_tokens)
    try:
        answering = ray_answering(ray_address, ray_actors, threads, config, "eval")
        t = evaluate(config, data, limit, output, runtime_compiler, ids, answering)
    except CallmaybeError as exc:
        fail(exc)
        return
    n = max(t["cases"], 1)
    click.echo(f"cases {t['cases']}: parsed {t['parsed']}, schema-valid {t['schema_valid']}, "
               f"right function {t['right_function']} ({100 * t['right_function'] / n:.1f}%), "
               f"right arguments {t['right_arguments']} ({100 * t['right_arguments'] / n:.1f}%); "
               + (f"one right call of several {t['one_right_call']} ({100 * t['one_right_call'] / n:.1f}%); "
                  if "one_right_call" in t else "") +
               f"{t['answer_seconds'] / n:.2f} s and {t['forward_passes'] / n:.1f} forward passes per request "
               f"({t['tokens'] / n:.1f} tokens)"
               + (f"; draft tokens {t['drafted']}, taken {t['accepted']}" if t.get("drafted") else ""))
    if "declined" in t:
        click.echo(f"declined (no call) {t['declined']} of {t['cases']} ({100 * t['declined'] / n:.1f}%)")
    if any(kinds.get("call", [0])[0] for kinds in t.get("declines", {}).values()) or len(t.get("declines", {})) > 1:
        click.echo("declined per language: " + "; ".join(
            f"{lang} " + ", ".join(f"{kind} {d} of {c}" for kind, (d, c) in sorted(kinds.items()))
            for lang, kinds in sorted(t["declines"].items())))
    if "without_grounding" in t:
        click.echo("the same generations without grounding (--keep-unstated): " + "; ".join(
            f"{key.replace('_', ' ')} {right}, grounding won {t['grounding_won'][key]} and lost "
            f"{t['grounding_lost'][key]}" for key, right in t["without_grounding"].items()))
    if t["failed"]:
        click.echo(f"failed (an error entry: a catalog that cannot be compiled, a failed answer) {t['failed']} of "
                   f"{t['cases']}")
    if profile:
        say("\n".join(t["profile"].lines(t["answer_seconds"])))
    if t["failed"]:
        sys.exit(1)


@main.command("serve")
@click.option("--model", default=DEFAULT_MODEL, show_default=True,
              help=f"Registry name ({', '.join(MODELS)}), local checkpoint folder or hub id; clients name it in "
                   "their requests' 'model'.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(min=1, max=65535), default=8000, show_default=True, help="Port.")
@click.option("--max-batch", type=click.IntRange(min=1), default=16, show_default=True,
              help="Turns decoded together, as rows of one forward pass.")
@click.option("--max-queue", type=click.IntRange(min=1), default=64, show_default=True,
              help="Turns that may wait for a row; past it a request gets 429.")
@click.option("--prefill-chunk", type=click.IntRange(min=0), default=16, show_default=True,
              help="While other turns decode, a new turn's prompt over 64 tokens (a new tool list's) is fed this "
                   "many tokens per forward pass, so that theirs stay quick; the new list's first answer takes "
                   "longer (0: all at once, which answers it sooner and stalls the others meanwhile).")
@click.option("--prefill-share", type=click.FloatRange(min=0), default=PREFILL_SHARE, show_default=True,
              callback=_finite,
              help="With --prefill-chunk: a new turn's chunk shrinks to what keeps the other turns' forward passes "
                   "within about 1 + this times their time without it (learnt from the passes' times), and a pass "
                   "waits a moment for the next request of a turn just answered. Smaller: their latency nearer an "
                   "idle server's, the new tool list's first answer later (0: the whole chunk in every pass).")
@click.option("--prefix-cache-mb", type=click.IntRange(min=0), default=512, show_default=True,
              help="Keys and values of tool lists' prompts kept, so that a list seen before is not read again "
                   "(least recently used out; about 28 KiB a token for the default model; 0: none kept).")
@click.option("--api-key", default=None, envvar="CALLMAYBE_API_KEY",
              help="Require 'Authorization: Bearer KEY' on every /v1 route (also $CALLMAYBE_API_KEY).")
@click.option("--max-new-tool-lists-per-minute", "per_minute", type=click.IntRange(min=0), default=30,
              show_default=True,
              help="Distinct new tool lists (or response schemas) compiled per minute; past it a request gets "
                   "429. Lists already in memory do not count.")
@click.option("--index-cache-size", type=click.IntRange(min=1), default=32, show_default=True,
              help="Compiled indexes kept in memory (least recently used dropped first). On disk they are cached "
                   f"in ~/.cache/callmaybe/indexes, {CACHE_BOUNDS}.")
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="torch CPU threads (default: torch's choice).")
@call_format_option(["auto", "plain", "tools"], "auto")
@decision_options_decorator
@click.option("--dtype", type=click.Choice(["auto", "float32", "bfloat16", "int8", "int4"]), default="auto",
              show_default=True, help="Weights' dtype (as for run).")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True,
              help="auto: a CUDA GPU when torch sees one, else the CPU.")
@click.option("--speculate/--no-speculate", default=True, show_default=True, help=SPECULATE_HELP)
@click.option("--ray", "ray_address", is_flag=False, flag_value="", default=None, metavar="[ADDRESS]",
              help="Serve with Ray Serve (pip install 'callmaybe[ray]'): --ray-replicas replicas, each batching "
                   "its own requests, behind this host and port; ADDRESS as for run --ray.")
@click.option("--ray-replicas", type=click.IntRange(min=1), default=2, show_default=True,
              help="With --ray: replicas (each loads the model once and takes --threads CPUs, default 1).")
@click.option("--ray-index-dir", type=click.Path(path_type=Path), default=None,
              help="With --ray: a folder every replica can read and write (the cluster's shared storage), where "
                   "a new tool list is compiled once per cluster (default: each node's index cache).")
@compile_limits_option()
def serve_cmd(model, host, port, max_batch, max_queue, prefill_chunk, prefill_share, prefix_cache_mb, api_key, per_minute, index_cache_size, threads,
              call_format, relevance_check, confirm_check, result_check, value_check, call_threshold, combined_threshold, dtype,
              device, speculate, ray_address, ray_replicas, ray_index_dir, compile_limits) -> None:
    """Serve an OpenAI-compatible API (POST /v1/chat/completions, POST /v1/responses, GET /v1/models, GET /health)
    whose tool calls are valid by construction.

    Exit status: 2 when the address cannot be listened on or the model cannot be loaded (one error line, before
    serving); 0 after SIGINT or SIGTERM.
    """
    from .server.serve import check_address

    try:
        try:
            if not ray_address:  # a cluster joined by its address listens on its own nodes
                check_address(host, port)
        except OSError as exc:
            raise InputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        from functools import partial

        from .compiler.build import prepare_vocabulary, runtime_compiler
        from .runtime.answering.session import RunConfig, Runtime
        from .server.compiling import ProcessCompiler
        from .server.serve import runtime_app, serve

        config = RunConfig(model=model, threads=threads, call_format=call_format, dtype=dtype, device=device,
                           max_batch=max_batch, relevance_check=relevance_check, confirm_check=confirm_check, result_check=result_check,
                           evidence_check=value_check, call_threshold=call_threshold,
                           combined_threshold=combined_threshold, speculate=speculate,
                           prefix_cache=prefix_cache_mb > 0, prefix_cache_bytes=prefix_cache_mb * 2**20)
        if ray_address is None and ray_index_dir is not None:
            raise InputError("--ray-index-dir needs --ray")
        if ray_address is not None:
            from .scale.cluster import require_ray
            from .scale.serve import ServeOptions, index_folder, serve_on_ray

            require_ray()
            options = ServeOptions(model, api_key, index_cache_size, per_minute, max_batch, max_queue,
                                   index_folder(ray_index_dir), prefill_chunk or None, prefill_share or None)
            serve_on_ray(ray_address, config, runtime_compiler, options, host, port, ray_replicas, threads or 1)
            return
        runtime = Runtime(config, runtime_compiler)
        # new tool lists compile in a worker process of their own, off the decoding path (issue 31)
        runtime.compile = ProcessCompiler(partial(runtime_compiler, limits=compile_limits), runtime.vocabulary,
                                          prepare_vocabulary)
        from .runtime.answering.engine import Engine

        engine = Engine(runtime, max_batch=max_batch, max_queue=max_queue, prefill_chunk=prefill_chunk or None,
                        prefill_share=prefill_share or None)
    except CallmaybeError as exc:
        fail(exc)
        return
    app = runtime_app(runtime, engine, model, api_key, index_cache_size, per_minute,
                      info={"max_batch": max_batch, "max_queue": max_queue})
    engine.start()
    say(f"serving {model} on http://{host}:{port}/v1 (max batch {max_batch}, max queue {max_queue}"
        + (", API key required)" if api_key else ")"))
    try:
        serve(app, host, port)
    finally:
        engine.close()
        app.state.indexes.close()
        runtime.compile.close()


@main.command("run")
@click.argument("input_pos", required=False, type=click.Path(path_type=Path))
@click.option("--functions_definition", "--functions-definition", "functions", type=click.Path(path_type=Path),
              default=DEFAULT_FUNCTIONS, show_default=True, help="Catalog of functions.")
@click.option("--input", "input_opt", type=click.Path(path_type=Path), default=None,
              help=f"Requests file (default {DEFAULT_INPUT}); same as the positional INPUT.")
@click.option("--output", type=click.Path(path_type=Path), default=DEFAULT_OUTPUT, show_default=True,
              help="Results file, written atomically.")
@run_options
@click.option("--index", "index_path", type=click.Path(path_type=Path), default=None,
              help="Compiled index to use (default: a matching one shipped with callmaybe, beside the model or "
                   f"in the cache, else compile one into the cache, ~/.cache/callmaybe/indexes: {CACHE_BOUNDS}).")
@click.option("--trace", is_flag=True, help="Print every generated token: forced or chosen, allowed, top 3.")
@click.option("--no-prefix-cache", is_flag=True, help="Recompute the catalog prompt for every request.")
@click.option("--interactive", is_flag=True, help="Type requests at a prompt and get calls back.")
@click.option("--resume", is_flag=True,
              help="Continue an interrupted run from its journal (OUTPUT.journal.jsonl): requests it answered "
                   "(same position, same prompt) are not answered again. Refused for a journal of another model, "
                   "index or flags.")
@ray_options
def run_cmd(input_pos, functions, input_opt, output, model, max_tokens, threads, call_format, tool_choice,
            parallel_calls, relevance_check, confirm_check, result_check, value_check, call_threshold, combined_threshold,
            keep_unstated, dtype, device, max_batch, speculate, profile, index_path, trace, no_prefix_cache,
            interactive, resume, ray_address, ray_actors) -> None:
    """Answer a file of requests with one schema-valid call each.

    Each answer is appended to a journal beside the output as it is produced; the output is written
    atomically at the end and the journal deleted. Exit status: 0 every request answered; 1 some requests got
    an error entry, or the output could not be written (the journal keeps the answers); 2 bad input (before
    the model is loaded); 130 / 143 interrupted by SIGINT / SIGTERM (the journal is kept: rerun with
    --resume).
    """
    try:
        with signals_interrupt():
            from .compiler.build import runtime_compiler
            from .runtime.answering.session import RunConfig, interactive as interactive_session, run_file

            if wants_fixed_threshold(max_batch, tool_choice):
                fix_mmap_threshold()  # a steady peak RSS (core/malloc.py)
            config = RunConfig(model=model, index_path=index_path, max_tokens=max_tokens, threads=threads,
                               call_format=resolve_call_format(call_format),
                               prefix_cache=not no_prefix_cache, keep_unstated=keep_unstated, trace=trace,
                               dtype=dtype, device=device, max_batch=max_batch, tool_choice=tool_choice,
                               parallel_calls=parallel_calls, relevance_check=relevance_check,
                               confirm_check=confirm_check, result_check=result_check, evidence_check=value_check, call_threshold=call_threshold,
                               combined_threshold=combined_threshold, speculate=speculate)
            on_answer = show_trace if trace else None
            if interactive:
                if ray_address is not None:
                    raise InputError("--ray answers a requests file; --interactive answers here")
                interactive_session(config, functions, runtime_compiler, on_answer=on_answer)
                return
            if input_pos is not None and input_opt is not None and input_pos != input_opt:
                raise InputError("give the input file once: as INPUT or as --input")
            answering = ray_answering(ray_address, ray_actors, threads, config, "run")
            outcome = run_file(config, functions, input_pos or input_opt or DEFAULT_INPUT, output,
                               runtime_compiler, on_answer, resume, answering)
    except CallmaybeError as exc:
        fail(exc)
        return
    except Interrupted as exc:
        say(str(exc))
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:  # before the run began (loading modules, reading inputs), or ending --interactive
        if not interactive:
            say("interrupted before any request was answered")
        sys.exit(128 + signal.SIGINT)
    s = outcome.stats
    tps = s.tokens / outcome.answer_seconds if outcome.answer_seconds else 0.0
    resumed = f", {outcome.resumed} from the journal" if outcome.resumed else ""
    say(f"wrote {len(outcome.results)} results to {output} ({outcome.failed} failed{resumed}) in "
        f"{outcome.seconds:.1f} s; {s.tokens} tokens ({s.chosen} chosen, {s.forced} forced), "
        f"{s.forward_passes} forward passes, {tps:.1f} tokens/s while answering"
        + (f"; draft tokens {s.drafted}, taken {s.accepted}" if s.drafted else ""))
    if profile:
        say("\n".join(outcome.profile.lines(outcome.answer_seconds)))
    if outcome.failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
