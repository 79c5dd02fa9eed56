"""Convert a model atc-style with an HTML report, render the report headless, save a PNG.

    python bench/render_report.py [--model tiny_resnet|resnet50|cnn|bert_pipeline]
                                  [--png docs/img/report.png] [--width 1000 --height 4200]
                                  [--keep report.html] [--json figures.json] [--section ID]

The default is the README's main-job command on the bundled example, run through
``ge-rewrite`` itself in a scratch folder (so the report shows short relative paths)::

    ge-rewrite --model=tiny_resnet.onnx --framework=5 --output=tiny_resnet \
        --soc_version=Ascend310P3 --input_shape=image:-1,3,32,32 --dynamic_batch_size=1,8 \
        --report=tiny_resnet.html

``resnet50`` converts ResNet-50 from ``bench/.cache`` (``python bench/models.py resnet50``
exports it; needs the ``torch`` extra) with ``--precision_mode=force_fp16``;
``bert_pipeline`` cuts BERT-base (``python bench/models.py bert_base``) into 4 stages by cost
(render its stages alone with ``--section pipeline --png docs/img/pipeline.png --height
1400``); ``cnn`` the small
test CNN of ``gerules.testing``. The page is rendered by Chromium (``apt-get install
chromium``) with a fresh profile and no network (``gerules.report.screenshot``). Prints the
conversion and render times, the page size and the PNG size; ``--json`` writes the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import onnx

from gerules.cli.main import main as ge_rewrite
from gerules.report.screenshot import find_chromium, png_size, screenshot
from gerules.testing.models import cnn

ROOT = Path(__file__).resolve().parent.parent
PRESETS: dict[str, tuple[Path | None, list[str]]] = {
    "tiny_resnet": (ROOT / "examples" / "models" / "tiny_resnet.onnx",
                    ["--input_shape=image:-1,3,32,32", "--dynamic_batch_size=1,8"]),
    "resnet50": (ROOT / "bench" / ".cache" / "resnet50-opset17.onnx",
                 ["--input_shape=input:1,3,224,224", "--precision_mode=force_fp16"]),
    "cnn": (None, ["--input_shape=input:1,3,16,16", "--precision_mode=allow_mix_precision"]),
    "bert_pipeline": (ROOT / "bench" / ".cache" / "bert_base-opset17.onnx",
                      ["--input_shape=input_ids:1,128;attention_mask:1,128", "--partitions=4",
                       "--partition_by=cost"]),
}


def _model(choice: str, folder: Path) -> tuple[Path, list[str]]:
    """The model, linked or written into ``folder`` under a short name, and its flags."""
    source, flags = PRESETS[choice]
    path = folder / f"{choice}.onnx"
    if source is None:
        onnx.save(cnn().model, path)
    elif not source.is_file():
        sys.exit(f"{source} not found: run 'python bench/models.py resnet50' first")
    else:
        path.symlink_to(source)
    return Path(path.name), flags


def _only(html: Path, section: str) -> Path:
    """A page with the report's head and one of its sections."""
    text = html.read_text(encoding="utf-8")
    start = text.find(f'<section id="{section}">')
    if start < 0:
        sys.exit(f"the report has no section '{section}'")
    end = text.index("</section>", start) + len("</section>")
    main_at = text.index("<main>") + len("<main>")
    page = html.with_name(f"{html.stem}.{section}.html")
    page.write_text(text[:main_at] + text[start:end] + "</main></body></html>\n",
                    encoding="utf-8")
    return page


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny_resnet", choices=sorted(PRESETS))
    parser.add_argument("--png", type=Path, default=ROOT / "docs" / "img" / "report.png")
    parser.add_argument("--width", type=int, default=1000)
    parser.add_argument("--height", type=int, default=4200)
    parser.add_argument("--keep", type=Path, help="also copy the HTML report here")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--section", help="render only this section of the page (e.g. "
                        "pipeline)")
    args = parser.parse_args()
    chromium = find_chromium()
    if chromium is None:
        sys.exit("no Chromium found: apt-get install -y chromium")
    png = args.png.resolve()
    home = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="gerules-report-") as tmp:
        folder = Path(tmp)
        model, flags = _model(args.model, folder)
        os.chdir(folder)  # short relative paths in the report (it shows the command line)
        out = Path(model.stem)
        argv = [f"--model={model}", "--framework=5", f"--output={out}",
                "--soc_version=Ascend310P3", *flags, f"--report={out}.html"]
        start = time.perf_counter()
        code = ge_rewrite(argv)
        convert_s = time.perf_counter() - start
        if code != 0:
            return code
        html = Path(f"{out}.html")
        if args.section:
            html = _only(html, args.section)
        start = time.perf_counter()
        screenshot(html, png, width=args.width, height=args.height, chromium=chromium)
        render_s = time.perf_counter() - start
        figures = {"model": args.model, "convert_s": round(convert_s, 2),
                   "render_s": round(render_s, 2), "html_bytes": html.stat().st_size,
                   "png": str(png), "png_size": list(png_size(png))}
        html_text = html.read_bytes()
        os.chdir(home)
        if args.keep:
            args.keep.write_bytes(html_text)
    print(f"\nconverted in {figures['convert_s']} s; rendered by {chromium} in "
          f"{figures['render_s']} s; page {figures['html_bytes']} bytes; wrote {png} "
          f"({figures['png_size'][0]}x{figures['png_size'][1]})")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
