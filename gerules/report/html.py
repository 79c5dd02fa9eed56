"""The conversion report as one self-contained HTML page (inline CSS and SVG, no scripts).

Invariants:
- ``render(report)`` is a pure function of the JSON report (``collect.conversion_report``):
  the same report gives the same bytes.
- Every string that came from the model or the command line (node, tensor, op and rule names,
  guard reasons, paths) is escaped; the page loads nothing from the network and runs no script.
- The page is well-formed XML (polyglot XHTML: every element closed, attributes quoted), so it
  can be checked with an XML parser; sections have stable ids (``SECTIONS``: ``summary``,
  ``ops``, ``latency``, ``fusions``, ``rejected``, ``precision``, ``graph``, ``nodes``,
  ``memory``, ``layout``, ``pipeline``, ``saturation``, ``phases``).
- Every cost figure is labelled as an estimate; the precision error is labelled as measured.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .. import figures
from . import layout
from .svg import (
    Block,
    GNode,
    Pair,
    esc,
    graph_picture,
    lifetime_chart,
    line_chart,
    paired_bars,
    stage_color,
    timeline_chart,
)

SECTIONS = ("summary", "ops", "latency", "fusions", "rejected", "precision", "graph", "nodes",
            "memory", "layout", "pipeline", "saturation", "phases")

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2733;
margin:0;background:#eef1f5}
main{max-width:1000px;margin:0 auto;padding:20px 28px 40px;background:#fff}
h1{font-size:22px;margin:4px 0 2px}h2{font-size:17px;margin:28px 0 8px;
border-bottom:2px solid #e3e7ed;padding-bottom:4px}
.sub{color:#5b6775;margin:0 0 12px;overflow-wrap:anywhere}
code{font:12px/1.4 ui-monospace,Menlo,monospace;background:#f3f5f8;padding:1px 4px;
border-radius:3px}p code{overflow-wrap:anywhere}td code{white-space:nowrap}
h3{font-size:14px;margin:16px 0 4px}details{margin:2px 0 8px}summary{cursor:pointer;
color:#2f6db5}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:14px 0}
.card{flex:1 1 170px;border:1px solid #dde2e9;border-radius:8px;padding:8px 12px;
background:#fafbfc}.card b{display:block;font-size:19px}.card span{color:#5b6775;font-size:12px}
table{border-collapse:collapse;width:100%;margin:6px 0 4px;font-size:13px}
th,td{padding:3px 8px;border-bottom:1px solid #e8ebf0;text-align:left;vertical-align:top;
overflow-wrap:anywhere}
th{background:#f3f5f8;font-weight:600}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
.est{display:inline-block;font-size:11px;color:#7a4b00;background:#fff3d6;border-radius:3px;
padding:0 5px;margin-left:6px;vertical-align:middle}
.meas{display:inline-block;font-size:11px;color:#0b5a2a;background:#dcf5e6;border-radius:3px;
padding:0 5px;margin-left:6px;vertical-align:middle}
.warn{color:#8a3b00}.muted{color:#6b7684}.lbl{font:11px sans-serif;fill:#33404d}
.val{font:10px sans-serif;fill:#5b6775}svg{display:block;margin:6px 0}
.gop{font:600 11px sans-serif;fill:#1d2733}.gname{font:9px sans-serif;fill:#5b6775}
.blk{font:9px sans-serif;fill:#1d2733}.tl{font:600 10px sans-serif;fill:#ffffff}
.graph{overflow:auto;max-height:900px;border:1px solid #e3e7ed;border-radius:6px}
tr:target{background:#fff3d6}
@media print{main{max-width:none;padding:0}details{display:block}
details>summary{display:none}.graph{max-height:none;overflow:visible}
*{-webkit-print-color-adjust:exact;print-color-adjust:exact}}
"""


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]], numeric: Iterable[int] = ()
           ) -> str:
    right = set(numeric)
    head = "".join(f'<th class="n">{esc(h)}</th>' if k in right else f"<th>{esc(h)}</th>"
                   for k, h in enumerate(headers))
    body = []
    for row in rows:
        cells = "".join(f'<td class="n">{_cell(v)}</td>' if k in right else f"<td>{_cell(v)}</td>"
                        for k, v in enumerate(row))
        body.append(f"<tr>{cells}</tr>")
    if not body:
        body.append(f'<tr><td colspan="{len(headers)}" class="muted">none</td></tr>')
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _long_table(headers: Sequence[str], rows: Sequence[Sequence[Any]],
                numeric: Iterable[int] = (), shown: int = 10) -> str:
    """The first ``shown`` rows, the rest in a ``<details>`` block (no script needed)."""
    numeric = tuple(numeric)
    if len(rows) <= shown + 2:
        return _table(headers, rows, numeric)
    rest = _table(headers, rows[shown:], numeric)
    return (_table(headers, rows[:shown], numeric)
            + f"<details><summary>{len(rows) - shown} more rows</summary>{rest}</details>")


class Raw(str):
    """Markup built here (already escaped), passed through ``_cell`` unchanged."""


def _cell(v: Any) -> str:
    if isinstance(v, Raw):
        return str(v)
    if isinstance(v, float):
        return f"{v:,.1f}" if abs(v) >= 10 else f"{v:.3g}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return esc("" if v is None else v)


def _section(key: str, title: str, body: str, tag: str = "") -> str:
    return f'<section id="{key}"><h2>{esc(title)}{tag}</h2>{body}</section>'


EST = Raw('<span class="est">estimate</span>')
MEAS = Raw('<span class="meas">measured</span>')


def mib(n: Any) -> str:
    """A byte count for people: B, KiB, MiB or GiB."""
    value = float(n or 0)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024:
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return f"{value:,.2f} GiB"


def _card(value: str, label: str) -> str:
    return f'<div class="card"><b>{esc(value)}</b><span>{esc(label)}</span></div>'


def summary(r: Mapping[str, Any]) -> str:
    rec, opts = figures.of_report(r), r.get("options", {})
    h = figures.headline(rec)
    first: Mapping[str, Any] = next(iter(rec.get("memory", {}).values()), {})
    phases = r.get("phases_s", {})
    cards = [
        _card(f"{h.nodes_source} \u2192 {h.nodes_final}", "nodes before \u2192 after"),
        _card(f"{h.us_source:,.0f} \u2192 {h.us_final:,.0f} \u00b5s",
              f"latency ({h.speedup:.2f}x), estimate"),
        _card(mib(first.get("arena")), f"arena (no reuse: {mib(first.get('no_reuse'))})"),
        _card(mib(first.get("weights")), "weights"),
        _card(str(opts.get("precision_mode", "")), "precision mode"),
        _card(f"{sum(phases.values()):.2f} s", "conversion time"),
    ]
    facts = [("model", r.get("source", "")), ("framework", r.get("framework", "onnx")),
             ("output", r.get("output", "")),
             ("SoC", opts.get("soc_version", "")), ("opt level", opts.get("opt_level", "")),
             ("target", opts.get("target", "")),
             ("variants", ", ".join(v.get("name", "") for v in r.get("variants", [])))]
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in facts)
    cmd = r.get("command_line") or ""
    notes = "".join(f'<p class="muted">note: {esc(n)}</p>' for n in r.get("notes", []))
    return (f'<div class="cards">{"".join(cards)}</div><table>{rows}</table>'
            + (f"<p>command line: <code>{esc(cmd)}</code></p>" if cmd else "") + notes)


def ops(r: Mapping[str, Any]) -> str:
    rec = figures.of_report(r)
    before, after = rec.get("ops", {}).get("source", {}), rec.get("ops", {}).get("final", {})
    eb, ea = rec.get("by_op_us", {}).get("source", {}), rec.get("by_op_us", {}).get("final", {})
    names = sorted(set(before) | set(after), key=lambda o: (-before.get(o, 0), o))
    rows = [(o, before.get(o, 0), after.get(o, 0), float(eb.get(o, 0.0)), float(ea.get(o, 0.0)))
            for o in names]
    return (_table(["op", "count before", "count after", "est. \u00b5s before",
                    "est. \u00b5s after"], rows, numeric=(1, 2, 3, 4))
            + '<p class="muted">after: the graph written, after optimization and precision '
              "changes (Casts included).</p>")


def latency(r: Mapping[str, Any]) -> str:
    rec = figures.of_report(r)
    eb, ea = rec.get("by_op_us", {}).get("source", {}), rec.get("by_op_us", {}).get("final", {})
    rows = [Pair(o, float(eb.get(o, 0.0)), float(ea.get(o, 0.0))) for o in set(eb) | set(ea)]
    label = rec.get("label") or r.get("estimate_label", "")
    chart = paired_bars(rows, unit="\u00b5s", title="estimated latency per op type")
    return chart + f'<p class="muted">{esc(label)}; symbolic dims count as 1.</p>'


def fusions(r: Mapping[str, Any]) -> str:
    found = r.get("optimize", {}).get("fusions", [])
    by_rule: dict[str, list[Mapping[str, Any]]] = {}
    for f in found:
        by_rule.setdefault(str(f.get("rule")), []).append(f)
    counts = [(Raw(f"<code>{esc(rule)}</code>"), len(fs),
               ", ".join(sorted({str(f.get("op")) for f in fs})),
               " + ".join(str(x.get("op")) for x in fs[0].get("replaced", [])))
              for rule, fs in sorted(by_rule.items(), key=lambda kv: -len(kv[1]))]
    rows = []
    for f in found:
        replaced = ", ".join(f"{x.get('node')} ({x.get('op')})" for x in f.get("replaced", []))
        chain = " \u2192 ".join(str(c) for c in f.get("chain", []) or [f.get("rule")])
        rows.append((Raw(f"<code>{esc(chain)}</code>"), f.get("node"),
                     Raw(f"<code>{esc(f.get('op'))}</code>"), replaced))
    return (_table(["rule", "fusions", "creates", "replaces (first one)"], counts, (1,))
            + f"<h3>all {len(rows)} fusions</h3>"
            + _long_table(["rules (earliest first)", "new node", "op", "replaced nodes"], rows,
                          shown=6))


def rejected(r: Mapping[str, Any]) -> str:
    rules = r.get("optimize", {}).get("rules", {})
    rows = [(Raw(f"<code>{esc(rule)}</code>"), Raw(f"<code>{esc(reason)}</code>"), count)
            for rule, reason, count in figures.top_reasons(rules)]
    used = sorted(((k, v) for k, v in rules.items() if v.get("applied")),
                  key=lambda kv: (-kv[1].get("kept", 0), -kv[1].get("applied", 0), kv[0]))
    table = _long_table(["rule", "matched", "applied", "kept in the graph written"],
                        [(Raw(f"<code>{esc(k)}</code>"), v.get("matches", 0),
                          v.get("applied", 0), v.get("kept", 0)) for k, v in used],
                        numeric=(1, 2, 3), shown=15)
    return (_long_table(["rule", "guard that failed", "times"], rows, numeric=(2,))
            + '<p class="muted">A pattern constant that is not the one a rule asks for '
              "(<code>x + 0</code> on <code>x + 1</code>), and an operand that is not "
              "constant where the rule's only guard is <code>const(w)</code>, is no match, "
              "not listed here.</p>"
            + "<h3>rules applied</h3>" + table
            + '<p class="muted">matched: matches whose guards were tried; applied: those that '
              "changed the e-graph; kept: those the extracted graph still shows (itself or "
              "inside a later fusion). A rule can apply and lose at extraction when its result "
              "is dearer or the target forbids it.</p>")


def precision(r: Mapping[str, Any]) -> str:
    p = r.get("precision", {})
    mode, est = p.get("mode", ""), p.get("estimate", {})
    parts = [f"<p>mode <code>{esc(mode)}</code> (the default here is "
             f"<code>{esc(p.get('default_mode', ''))}</code>; atc's is "
             "<code>force_fp16</code>).</p>"]
    casts = figures.cast_warning(figures.of_report(r))
    if casts:
        parts.append(f'<p class="warn">warning: {esc(casts)}</p>')
    if "estimated_us_fp16" in est:
        parts.append(f"<p>Nothing changed dtype. Under <code>force_fp16</code> the model would "
                     f"take {est['estimated_us_fp16']:,.1f} \u00b5s instead of "
                     f"{est['estimated_us']:,.1f} \u00b5s{EST} and its weights "
                     f"{mib(est.get('weights_bytes_fp16'))} instead of "
                     f"{mib(est.get('weights_bytes'))}.</p>")
    if "nodes_converted" in p:
        parts.append(_table(["", "value"], [
            (f"nodes computing in {p.get('target_dtype')}", p["nodes_converted"]),
            (f"float nodes kept in {p.get('source_dtype')}", len(p.get("kept", []))),
            ("Casts inserted", p.get("casts_inserted", 0)),
            ("Casts retargeted", p.get("casts_retargeted", 0)),
            ("Casts left after the simplify rules", p.get("casts_after_rules", 0)),
            ("weights converted ahead of time", p.get("weights_converted", 0)),
            ("weight bytes before \u2192 after",
             f"{mib(p.get('weight_bytes', {}).get('before'))} \u2192 "
             f"{mib(p.get('weight_bytes', {}).get('after'))}"),
            ("weight values saturated", p.get("weight_saturated", 0)),
            ("estimated \u00b5s before \u2192 after",
             f"{figures.headline(figures.of_report(r)).us_optimized:,.1f} \u2192 "
             f"{figures.headline(figures.of_report(r)).us_final:,.1f} (estimate)"),
        ], numeric=(1,)))
        parts.append("<h3>kept in their original dtype</h3>" + _long_table(
            ["node", "op", "why"],
            [(k.get("node"), k.get("op"), k.get("reason")) for k in p.get("kept", [])]))
    checked = figures.of_report(r).get("precision", {})
    if checked.get("status") == "measured":
        parts.append(f"<h3>output error against the optimized graph in its original dtypes"
                     f"{MEAS}</h3>")
        parts.append(_table(["output", "max abs error", "max rel error (to max |ref|)",
                             "finite"],
                            [(e.get("output"), _sci(e.get("max_abs")), _sci(e.get("max_rel")),
                              "yes" if e.get("finite") else "NO")
                             for e in checked.get("outputs", [])], numeric=(1, 2)))
        parts.append(f'<p class="muted">{esc(checked.get("note"))}</p>')
    elif checked.get("status") == "not measured":
        parts.append(f'<p class="muted">output error {esc(checked.get("note"))}</p>')
    return "".join(parts)


def _sci(x: Any) -> str:
    return "inf" if x is None else f"{float(x):.2e}"


def memory(r: Mapping[str, Any]) -> str:
    keys = ("no_reuse", "lower_bound", "file_order_bound", "arena", "weights", "inputs")
    rows = [(name, *(Raw(esc(mib(f.get(k)))) for k in keys), f.get("strategy"), f.get("order"))
            for name, f in figures.of_report(r).get("memory", {}).items()]
    table = _table(["variant", "no reuse", "lower bound", "file-order bound", "arena",
                    "weights", "inputs", "offsets by", "order"], rows, numeric=range(1, 7))
    arenas = r.get("arenas") or []
    curves = [(str(a.get("variant", "")), [int(x) for x in a.get("in_use", [])])
              for a in arenas]
    biggest = max((int(a.get("arena_bytes", 0)) for a in arenas), default=0)
    parts = [table]
    if curves:
        parts.append("<h3>arena bytes holding live tensors, step by step</h3>"
                     + line_chart(curves, title="peak memory over time", limit=biggest)
                     + '<p class="muted">One line per variant; the dashed line is the largest '
                       "arena. The peak is the lower bound the planner is measured against.</p>")
    for a in arenas:
        blocks = [Block(str(b["tensor"]), int(b["offset"]), int(b["size"]), int(b["first"]),
                        int(b["last"])) for b in a.get("blocks", [])]
        parts.append(f"<h3>arena of variant <code>{esc(a.get('variant', ''))}</code>: "
                     f"{len(blocks)} tensors in {mib(a.get('arena_bytes'))}</h3>"
                     + lifetime_chart(blocks, int(a.get("arena_bytes", 0)),
                                      int(a.get("steps", 0)),
                                      title=f"arena lifetimes ({a.get('variant', '')})"))
    parts.append('<p class="muted">Each rectangle is a tensor: from the step that writes it to '
                 "its last reader (x), at its offset in the arena (y); the largest carry their "
                 "name and size. Rectangles sharing a block in turn are reuse; none overlap "
                 "while alive (the planner verifies it).</p>")
    return "".join(parts)


def data_formats(r: Mapping[str, Any]) -> str:
    """The data formats of the graph written: the TransData nodes before and after they were
    moved and cancelled, the formats held, the padding bytes, the transfer time, and every
    tensor's format."""
    lay = figures.of_report(r).get("layout")
    line = figures.layout_line(figures.of_report(r))
    if not isinstance(lay, Mapping) or line is None:
        return '<p class="muted">No layout figures (an ONNX target, or an older report).</p>'
    td, pad = lay["transdata"], lay["padding_bytes"]
    rows = [("TransData, a pair around every cube op (the naive layout)", td["naive"]),
            ("TransData left after moving and cancelling them", td["final"]),
            ("transfers plain cube ops still imply", td["implied"]),
            ("padding bytes of activations", Raw(esc(mib(pad["activations"])))),
            ("padding bytes of weights", Raw(esc(mib(pad["weights"])))),
            ("estimated time in format transfers (\u00b5s)", lay["transfer_us"])]
    held = lay["by_format"]
    kinds = sorted(set(held["activations"]) | set(held["weights"]))
    counts = [(fmt, held["activations"].get(fmt, 0), held["weights"].get(fmt, 0))
              for fmt in kinds]
    tensors = sorted(lay.get("tensors", {}).items())
    cells = "".join(f"<tr><td><code>{esc(k)}</code></td><td>{esc(v)}</td></tr>"
                    for k, v in tensors)
    return (_table(["", ""], rows, numeric=(1,))
            + _table(["format", "activations", "weights"], counts, numeric=(1, 2))
            + f"<details><summary>every tensor's format ({len(tensors)})</summary><table>"
              "<thead><tr><th>tensor</th><th>format</th></tr></thead>"
              f"<tbody>{cells}</tbody></table></details>"
            + '<p class="muted">NC1HWC0 holds an activation in blocks of C0 channels, FRACTAL_Z '
              "a convolution's weight and FRACTAL_NZ a matmul's operands in the cube's 16 x C0 "
              "fractals; the padding those blocks add is what the padding rows count.</p>")


DRAW_LIMIT = 120  # nodes drawn one by one; larger graphs are drawn by block


def graph(r: Mapping[str, Any]) -> str:
    graphs = r.get("graphs") or {}
    parts = []
    for key, title in (("before", "the model as loaded"), ("after", "the graph written")):
        data = graphs.get(key)
        if data:
            parts.append(_picture(data.get("nodes", []), key, title))
    if not parts:
        return '<p class="muted">no graph in this report</p>'
    return ('<p class="muted">Top to bottom in execution order; orange boxes are nodes a rule '
            "created, dashed red ones nodes a fusion replaced. A click goes to the node's row "
            "below. Graphs over " + str(DRAW_LIMIT) + " nodes are drawn by block (name "
            "prefix).</p>" + "".join(parts))


def _picture(nodes: list[Mapping[str, Any]], key: str, title: str,
             stage_of: Sequence[int] = ()) -> str:
    """The layered picture; with ``stage_of`` (node -> pipeline stage) every box is filled
    with its stage's colour (a block: the stage of most of its nodes)."""
    names = [str(n.get("name", "")) for n in nodes]
    groups = layout.blocks(names, DRAW_LIMIT)
    order = list(dict.fromkeys(groups))
    index = {g: i for i, g in enumerate(order)}
    members: dict[int, list[int]] = {}
    for k, g in enumerate(groups):
        members.setdefault(index[g], []).append(k)
    boxes = []
    for i, g in enumerate(order):
        ks = members[i]
        preds = sorted({index[groups[p]] for k in ks for p in nodes[k].get("in", [])} - {i})
        marks = {str(nodes[k].get("mark", "")) for k in ks}
        mark = "fused" if "fused" in marks else "gone" if "gone" in marks else ""
        color = ""
        if stage_of:
            stages = [int(stage_of[k]) for k in ks if k < len(stage_of)]
            color = stage_color(max(set(stages), key=stages.count)) if stages else ""
        if len(ks) == 1:
            n = nodes[ks[0]]
            boxes.append(GNode(str(n.get("op", "")), str(n.get("name", "")), tuple(preds),
                               f"#{key}-{ks[0]}", mark,
                               f"{n.get('name')} ({n.get('op')}): {n.get('us', 0)} us", color))
        else:
            ops: dict[str, int] = {}
            for k in ks:
                ops[str(nodes[k].get("op"))] = ops.get(str(nodes[k].get("op")), 0) + 1
            top = ", ".join(f"{o} {c}" for o, c in sorted(ops.items(), key=lambda kv: -kv[1]))
            boxes.append(GNode(g, f"{len(ks)} nodes", tuple(p for p in preds if p < i),
                               f"#{key}-{ks[0]}", mark, f"{g}: {top}", color))
    places = layout.layered([b.preds for b in boxes])
    picture = graph_picture(boxes, [(pl.layer, pl.slot) for pl in places],
                            title=f"{title}: {len(nodes)} nodes")
    how = f", by {len(order)} blocks" if len(order) < len(nodes) else ""
    return (f"<h3>{esc(title)}: {len(nodes)} nodes{how}</h3>"
            f'<div class="graph">{picture}</div>')


def node_tables(r: Mapping[str, Any]) -> str:
    """The 20 most expensive nodes, then every node of both graphs (the pictures' targets)."""
    graphs = r.get("graphs") or {}
    after = (graphs.get("after") or {}).get("nodes", [])
    where = {str(n.get("name")): k for k, n in enumerate(after)}
    rec = figures.of_report(r)
    top = [(Raw(f'<a href="#after-{where[str(n)]}"><code>{esc(n)}</code></a>'
                if str(n) in where else f"<code>{esc(n)}</code>"), op, float(us), bound)
           for n, op, us, bound in rec.get("nodes_us", [])]
    parts = ["<h3>the 20 most expensive nodes of the graph written" + str(EST) + "</h3>",
             _table(["node", "op", "est. \u00b5s", "bound by"], top, numeric=(2,))]
    for key, title in (("after", "every node of the graph written"),
                       ("before", "every node of the model as loaded")):
        nodes = (graphs.get(key) or {}).get("nodes", [])
        if not nodes:
            continue
        rows = "".join(
            f'<tr id="{key}-{k}"><td class="n">{k}</td><td><code>{esc(n.get("name"))}</code>'
            f'</td><td>{esc(n.get("op"))}</td><td class="n">{_cell(float(n.get("us", 0)))}</td>'
            f'<td>{_MARKS.get(str(n.get("mark", "")), "")}</td></tr>'
            for k, n in enumerate(nodes))
        parts.append(f"<details><summary>{esc(title)} ({len(nodes)})</summary><table><thead>"
                     "<tr><th class=\"n\">#</th><th>node</th><th>op</th>"
                     "<th class=\"n\">est. \u00b5s</th><th></th></tr></thead>"
                     f"<tbody>{rows}</tbody></table></details>")
    return "".join(parts)


_MARKS = {"fused": "made by a rule", "gone": "replaced by a fusion"}


def pipeline(r: Mapping[str, Any]) -> str:
    """The stages of a pipelined model: their figures, the graph coloured by stage and the
    schedule's timeline (stages x time)."""
    pipe = figures.of_report(r).get("pipeline")
    if not pipe:
        return ('<p class="muted">One device. <code>--partitions K</code> cuts the model into '
                "K pipeline stages (<code>--partition_by depth|memory|cost</code>).</p>")
    rows = [(Raw(f'<span style="background:{stage_color(int(s["stage"]))};padding:0 6px">'
                 f'{int(s["stage"])}</span>'), s["nodes"], float(s["compute_us"]),
             float(s["transfer_us"]), Raw(esc(mib(s["transfer_bytes"]))),
             Raw(esc(mib(s["weights_bytes"]))), Raw(esc(mib(s.get("arena_bytes", 0)))))
            for s in pipe.get("stages", [])]
    link = pipe.get("link", {})
    parts = [f"<p>{len(rows)} stages cut by <b>{esc(pipe.get('method'))}</b>; slowest / mean "
             f"stage {float(pipe.get('balance', 0)):.2f}; {esc(mib(pipe.get('transfer_bytes')))}"
             f" cross the cuts per micro-batch over a {esc(link.get('gbps'))} GB/s link "
             f"({esc(link.get('latency_us'))} \u00b5s per transfer).</p>",
             _table(["stage", "nodes", "est. compute \u00b5s", "est. transfer \u00b5s",
                     "received", "weights", "arena"], rows, numeric=range(1, 7))]
    sch = pipe.get("schedule") or {}
    if sch:
        events = [(int(e[0]), int(e[1]), str(e[2]), float(e[3]), float(e[4]))
                  for e in sch.get("events", [])]
        parts.append(f"<h3>schedule: {sch.get('micro_batches')} micro-batches, GPipe fill and "
                     f"drain{EST}</h3>"
                     + timeline_chart(len(rows), events, title="pipeline timeline")
                     + f'<p class="muted">{float(sch.get("makespan_us", 0)):.1f} \u00b5s for all '
                     f"micro-batches, {float(sch.get('throughput_per_s', 0)):.0f} per second "
                     f"against {float(sch.get('single_device_throughput_per_s', 0)):.0f} on one "
                     f"device ({float(sch.get('speedup', 0)):.2f}x); the stages idle "
                     f"{100 * float(sch.get('bubble', 0)):.0f} % of the time (the bubble).</p>")
    nodes = ((r.get("graphs") or {}).get("after") or {}).get("nodes", [])
    if nodes:
        parts.append(_picture(nodes, "after", "the graph written, by stage",
                              [int(x) for x in pipe.get("stage_of", [])]))
    return "".join(parts)


def saturation(r: Mapping[str, Any]) -> str:
    opt = r.get("optimize", {})
    sat, lim = opt.get("saturation", {}), opt.get("saturation", {}).get("limits", {})
    rows = [("stop reason", sat.get("stop_reason")), ("iterations", sat.get("iterations")),
            ("e-nodes", sat.get("egraph_nodes")), ("e-classes", sat.get("egraph_classes")),
            ("limits", f"{lim.get('iterations')} iterations, {lim.get('nodes')} e-nodes, "
                       f"{lim.get('seconds')} s"),
            ("extraction", ", ".join(f"{k}: {v}" for k, v in opt.get("extraction", {}).items())
             or ("ILP" if opt.get("opt_level") == "O3" else "greedy, DAG-aware")),
            ("switched off", ", ".join(opt.get("disabled", [])) or "nothing")]
    lay = sat.get("layout")
    if lay:  # the NPU data layout's own e-graph, built from the graph the first one gave
        rows.append(("layout e-graph", f"{lay.get('stop_reason')} after "
                                       f"{lay.get('iterations')} iterations, "
                                       f"{lay.get('egraph_nodes')} e-nodes, "
                                       f"{lay.get('egraph_classes')} e-classes"))
    warnings = "".join(f'<p class="warn">warning: {esc(w)}</p>' for w in opt.get("warnings", []))
    return _table(["", "value"], rows) + warnings


def phases(r: Mapping[str, Any]) -> str:
    rows = [(k, float(v)) for k, v in r.get("phases_s", {}).items()]
    opt = [(f"optimize: {k}", float(v)) for k, v in r.get("optimize", {}).get("phases_s",
                                                                                 {}).items()]
    return _table(["phase", "seconds"], rows + opt, numeric=(1,))


def render(r: Mapping[str, Any]) -> str:
    """The whole page (see the module invariants)."""
    title = f"gerules conversion report: {r.get('source', '')}"
    body = [f"<h1>Conversion report</h1><p class=\"sub\">{esc(r.get('source', ''))} \u2192 "
            f"{esc(r.get('output', ''))}</p>",
            _section("summary", "Summary", summary(r)),
            _section("ops", "Operators before and after", ops(r), EST),
            _section("latency", "Estimated latency per op type", latency(r), EST),
            _section("fusions", "Fusions (the rule and the nodes each replaced)", fusions(r)),
            _section("rejected", "Rules that matched but were not applied", rejected(r)),
            _section("precision", "Precision", precision(r)),
            _section("graph", "The graph before and after", graph(r)),
            _section("nodes", "Nodes and their estimated cost", node_tables(r), EST),
            _section("memory", "Memory", memory(r)),
            _section("layout", "Data layout (formats and TransData)", data_formats(r), EST),
            _section("pipeline", "Pipeline stages", pipeline(r)),
            _section("saturation", "Saturation: limits and stop reason", saturation(r)),
            _section("phases", "Time per phase", phases(r)),
            f'<p class="muted">{esc(r.get("estimate_label", ""))}. Latencies are estimates, '
            "never measurements; the precision error is measured on this machine's CPU.</p>"]
    return ('<!DOCTYPE html>\n<html xmlns="http://www.w3.org/1999/xhtml" lang="en"><head>'
            '<meta charset="utf-8"/><meta name="viewport" content="width=device-width"/>'
            f"<title>{esc(title)}</title><style>{CSS}</style></head><body><main>"
            + "".join(body) + "</main></body></html>\n")
