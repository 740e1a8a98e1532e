"""The ``callmaybe`` command line: parses flags and calls one function per command."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from .core.errors import CallmaybeError, InputError, SchemaError
from .core.registry import DEFAULT_MODEL, MODELS

DEFAULT_FUNCTIONS = Path("schemas/functions_definition.json")
DEFAULT_INPUT = Path("data/input/function_calling_tests.json")
DEFAULT_OUTPUT = Path("data/output/function_calling_results.json")


def fail(exc: CallmaybeError) -> None:
    click.echo(f"error: {exc}", err=True)
    sys.exit(exc.exit_code)


@click.group()
@click.version_option(package_name="callmaybe")
def main() -> None:
    """Function calling with small language models whose output is valid by construction."""


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
@click.option("--strict", is_flag=True, help="Fail when some keyword is not enforced by the grammar.")
@click.option("--prompt-format", type=click.Choice(["plain", "tools"]), default="plain", show_default=True,
              help="The call format the index is for: plain {\"name\", \"parameters\"} or the tools format "
                   "(<tool_call> then {\"name\", \"arguments\"}).")
def compile_cmd(schemas: Path, tokenizer: str, out_dir: Path, vocab_size: int | None, strict: bool,
                prompt_format: str) -> None:
    """Compile a catalog (a file or a folder of them) into an index for a tokenizer."""
    import time

    from .core.catalog import load_catalog
    from .commands import check_strict, compile_catalog, log, slug
    from .core.vocabulary import load_vocabulary

    try:
        functions = load_catalog(schemas)
        if strict:
            check_strict(functions)
        t = time.perf_counter()
        vocabulary = load_vocabulary(tokenizer, vocab_size)
        log(f"vocabulary {tokenizer}: {len(vocabulary.token_bytes):,} tokens, vocabulary size {vocabulary.vocab_size:,}, "
            f"prepared in {time.perf_counter() - t:.2f} s")
        name = schemas.stem if schemas.is_file() else schemas.resolve().name
        from .core.callformat import grammar_options

        suffix = "" if prompt_format == "plain" else f".{prompt_format}"
        path = out_dir / f"{slug(name)}.{slug(tokenizer)}{suffix}.safetensors"
        try:
            compile_catalog(functions, vocabulary, path, options=grammar_options(prompt_format))
        except SchemaError as exc:
            raise SchemaError(f"{schemas}: {exc}") from None
        except RecursionError:
            raise SchemaError(f"{schemas}: schema nested too deeply") from None
        except OSError as exc:
            raise InputError(f"{out_dir}: cannot write the index: {exc.strerror or exc}") from None
    except CallmaybeError as exc:
        fail(exc)


@main.command("match")
@click.option("--schema", "schema_path", type=click.Path(path_type=Path), default=None,
              help="A JSON schema (e.g. a function's parameters): texts are values.")
@click.option("--functions", "functions_path", type=click.Path(path_type=Path), default=None,
              help="A catalog (either format): texts are whole calls {\"name\": ..., \"parameters\": ...}.")
@click.option("--jsonl", "jsonl", type=click.Path(path_type=Path), default=None,
              help="A file with one text per line.")
@click.option("--strict", is_flag=True, help="Fail when some keyword is not enforced by the grammar.")
@click.argument("texts", nargs=-1)
def match_cmd(schema_path, functions_path, jsonl, strict, texts) -> None:
    """Say which texts (canonical layout) the compiled grammar accepts, one JSON line each."""
    from .commands import match
    try:
        if (schema_path is None) == (functions_path is None):
            raise InputError("give exactly one of --schema FILE or --functions FILE")
        items = list(texts)
        if jsonl is not None:
            try:
                items += jsonl.read_text(encoding="utf-8").rstrip("\n").split("\n")
            except OSError as exc:
                raise InputError(f"{jsonl}: cannot read: {exc.strerror or exc}") from None
            except UnicodeDecodeError as exc:
                raise InputError(f"{jsonl}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        for line in match(schema_path, functions_path, items, strict):
            click.echo(json.dumps(line, ensure_ascii=False))
    except CallmaybeError as exc:
        fail(exc)


@main.command("bench", context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.pass_context
def bench_cmd(ctx) -> None:
    """Compile, load and mask benchmark against the peers (bench/compile_bench.py; its flags pass through)."""
    import runpy

    from .commands import PACKAGE_DIR

    script = PACKAGE_DIR / "bench" / "compile_bench.py"
    if not script.exists():
        fail(CallmaybeError(f"{script}: benchmark script not found (run from a source checkout)"))
    sys.argv = [str(script), *ctx.args]
    runpy.run_path(str(script), run_name="__main__")


@main.command("inspect")
@click.argument("index_path", type=click.Path(path_type=Path))
def inspect_cmd(index_path: Path) -> None:
    """Show what an index file holds: states, rows, sizes, fingerprints."""
    from .commands import inspect_index

    try:
        for line in inspect_index(index_path):
            click.echo(line)
    except CallmaybeError as exc:
        fail(exc)


@main.command("eval")
@click.argument("data", type=click.Path(path_type=Path))
@click.option("--model", default=DEFAULT_MODEL, show_default=True, help="Model to evaluate.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Only the first N cases.")
@click.option("--output", type=click.Path(path_type=Path), default=None,
              help="Write every case's call {id, prompt, name, parameters} (or error) here.")
@click.option("--max-tokens", type=click.IntRange(min=1), default=256, show_default=True,
              help="Token budget per call.")
@click.option("--threads", type=click.IntRange(min=1), default=None, help="torch threads.")
@click.option("--prompt-format", type=click.Choice(["auto", "plain", "tools"]), default="plain", show_default=True)
@click.option("--keep-unstated", is_flag=True,
              help="Keep optional string arguments the request does not state (default: restate them from the "
                   "request, or leave them out).")
def eval_cmd(data, model, limit, output, max_tokens, threads, prompt_format, keep_unstated) -> None:
    """Score a data set with expected answers (a public-style folder or a BFCL cases.jsonl)."""
    from .runtime.evaluation import evaluate

    try:
        t = evaluate(data, model, limit, output, max_tokens, threads, prompt_format, keep_unstated)
    except CallmaybeError as exc:
        fail(exc)
        return
    n = max(t["cases"], 1)
    click.echo(f"cases {t['cases']}: parsed {t['parsed']}, schema-valid {t['schema_valid']}, "
               f"right function {t['right_function']} ({100 * t['right_function'] / n:.1f}%), "
               f"right arguments {t['right_arguments']} ({100 * t['right_arguments'] / n:.1f}%); "
               f"{t['seconds'] / n:.2f} s and {t['forward_passes'] / n:.1f} forward passes per request "
               f"({t['tokens'] / n:.1f} tokens)")


def show_trace(req: dict) -> None:
    """Print one request's trace on stderr as soon as it is answered (above the progress bar)."""
    from tqdm import tqdm

    from .commands import grounding_notes

    lines = [f"# {req['prompt']}"]
    lines += ["  " + json.dumps(step, ensure_ascii=False) for step in req.get("trace", [])]
    if req.get("error"):
        lines.append(f"  error: {req['error']}")
    lines += grounding_notes(req.get("restated", {}), req.get("dropped", []))
    tqdm.write("\n".join(lines), file=sys.stderr)


@main.command("run")
@click.argument("input_pos", required=False, type=click.Path(path_type=Path))
@click.option("--functions_definition", "--functions-definition", "functions", type=click.Path(path_type=Path),
              default=DEFAULT_FUNCTIONS, show_default=True, help="Catalog of functions.")
@click.option("--input", "input_opt", type=click.Path(path_type=Path), default=None,
              help=f"Requests file (default {DEFAULT_INPUT}); same as the positional INPUT.")
@click.option("--output", type=click.Path(path_type=Path), default=DEFAULT_OUTPUT, show_default=True,
              help="Results file, written atomically.")
@click.option("--model", default=DEFAULT_MODEL, show_default=True,
              help=f"Registry name ({', '.join(MODELS)}), local dir or hub id.")
@click.option("--index", "index_path", type=click.Path(path_type=Path), default=None,
              help="Compiled index to use (default: a matching one from indexes/ or the cache, else compile).")
@click.option("--max-tokens", type=click.IntRange(min=1), default=256, show_default=True,
              help="Token budget per call.")
@click.option("--threads", type=click.IntRange(min=1), default=None, help="torch threads (default: torch's choice).")
@click.option("--trace", is_flag=True, help="Print every generated token: forced or chosen, allowed, top 3.")
@click.option("--prompt-format", type=click.Choice(["auto", "plain", "tools"]), default="plain", show_default=True,
              help="tools: the chat template's tools= support and the model's own call format; plain: a system "
                   "message listing the catalog; auto: tools where the template supports it.")
@click.option("--no-prefix-cache", is_flag=True, help="Recompute the catalog prompt for every request.")
@click.option("--interactive", is_flag=True, help="Type requests at a prompt and get calls back.")
@click.option("--keep-unstated", is_flag=True,
              help="Keep optional string arguments the request does not state (default: restate them from the "
                   "request, or leave them out).")
def run_cmd(input_pos, functions, input_opt, output, model, index_path, max_tokens, threads, trace,
            prompt_format, no_prefix_cache, interactive, keep_unstated) -> None:
    """Answer a file of requests with one schema-valid call each."""
    from .commands import interactive_session, log, run

    if interactive:
        try:
            interactive_session(functions, model, index_path, max_tokens, threads, trace, prompt_format,
                                keep_unstated)
        except CallmaybeError as exc:
            fail(exc)
        return

    if input_pos is not None and input_opt is not None and input_pos != input_opt:
        fail(CallmaybeError("give the input file once: as INPUT or as --input"))
    input_path = input_pos or input_opt or DEFAULT_INPUT
    try:
        outcome = run(functions, input_path, output, model, index_path, max_tokens, threads, trace,
                      prompt_format, not no_prefix_cache, keep_unstated, show_trace if trace else None)
    except CallmaybeError as exc:
        fail(exc)
        return
    s = outcome.stats
    tps = s.tokens / s.seconds if s.seconds else 0.0
    log(f"wrote {len(outcome.results)} results to {output} ({s.failed} failed) in {outcome.seconds:.1f} s; "
        f"{s.tokens} tokens ({s.chosen} chosen, {s.forced} forced), {s.forward_passes} forward passes, "
        f"{tps:.1f} tokens/s while decoding")


if __name__ == "__main__":
    main()
