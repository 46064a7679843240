"""The HTML report's stylesheet, inlined into the page so the file stands alone (no network)."""

from __future__ import annotations

CSS = """
:root { --ink:#1f2328; --muted:#5b6470; --line:#e3e6ea; --bg:#f6f7f9; --card:#fff;
  --high:#c62828; --medium:#d97706; --low:#2563eb; --accent:#3d7ebf; --ok:#19a979; }
* { box-sizing:border-box; }
body { margin:0; background:var(--bg); color:var(--ink);
  font:14px/1.5 system-ui,-apple-system,"Segoe UI","DejaVu Sans",Roboto,sans-serif; }
code, pre { font-family:"DejaVu Sans Mono",SFMono-Regular,Menlo,Consolas,monospace; font-size:12.5px; }
.wrap { max-width:1180px; margin:0 auto; padding:0 28px; }
header.top { background:#16202e; color:#e9eef5; padding:26px 0 22px; }
header.top .brand { font-weight:700; letter-spacing:.08em; color:#8fb8e8; font-size:12px;
  text-transform:uppercase; }
header.top h1 { margin:4px 0 2px; font-size:26px; font-weight:650; }
header.top .sub { margin:0; color:#a9b4c2; font-size:13px; word-break:break-all; }
header.top .verdict { margin:10px 0 0; font-size:15px; font-weight:600; }
.cards { display:grid; grid-template-columns:repeat(auto-fit,minmax(160px,1fr)); gap:12px;
  margin-top:18px; }
.card { background:#223044; border-radius:10px; padding:12px 14px; }
.card .k { color:#a9b4c2; font-size:11.5px; text-transform:uppercase; letter-spacing:.05em; }
.card .v { font-size:22px; font-weight:650; color:#fff; margin-top:2px; overflow-wrap:anywhere; }
.card .v.long { font-size:15px; line-height:1.35; padding-top:4px; }
.card .s { color:#a9b4c2; font-size:12px; }
.card .v .high { color:#ff8a80; } .card .v .medium { color:#ffcc80; } .card .v .low { color:#90caf9; }
main { padding:8px 0 40px; }
section { background:var(--card); border:1px solid var(--line); border-radius:12px;
  padding:18px 22px; margin:18px 0; }
h2 { font-size:17px; margin:0 0 12px; }
h3 { font-size:14px; margin:16px 0 8px; color:var(--muted); }
table { border-collapse:collapse; width:100%; }
th, td { text-align:left; padding:6px 10px; border-bottom:1px solid var(--line); vertical-align:top; }
th { color:var(--muted); font-weight:600; font-size:12px; text-transform:uppercase;
  letter-spacing:.03em; }
td.num, th.num { text-align:right; font-variant-numeric:tabular-nums; white-space:nowrap; }
table.kv th { width:170px; text-transform:none; font-size:13px; letter-spacing:0; }
td.name { font-family:"DejaVu Sans Mono",Menlo,monospace; font-size:12px; word-break:break-all; }
.bar { display:inline-block; height:8px; background:var(--accent); border-radius:4px;
  vertical-align:middle; margin-right:6px; }
.finding { border:1px solid var(--line); border-left:5px solid var(--low); border-radius:10px;
  padding:14px 16px; margin:12px 0; }
.finding.high { border-left-color:var(--high); } .finding.medium { border-left-color:var(--medium); }
.fhead { display:flex; flex-wrap:wrap; align-items:center; gap:10px; }
.badge { font-size:11px; font-weight:700; color:#fff; border-radius:999px; padding:2px 9px;
  letter-spacing:.05em; background:var(--low); }
.badge.high { background:var(--high); } .badge.medium { background:var(--medium); }
.rule { font-weight:600; color:var(--ink); background:#eef1f5; padding:1px 7px; border-radius:6px; }
.saving { margin-left:auto; font-weight:650; color:var(--ok); }
.saving.none { color:var(--muted); font-weight:400; }
.tag { color:var(--muted); font-size:12.5px; }
.summary { font-size:15px; margin:8px 0 6px; }
details summary { cursor:pointer; color:var(--muted); font-size:12.5px; margin:4px 0; }
table.evidence td, table.evidence th { padding:3px 8px; font-size:12.5px; }
table.evidence th { width:230px; text-transform:none; letter-spacing:0; font-family:
  "DejaVu Sans Mono",Menlo,monospace; font-weight:400; }
table.mini th, table.mini td { font-size:11.5px; padding:2px 6px; font-family:"DejaVu Sans Mono",
  Menlo,monospace; text-transform:none; letter-spacing:0; word-break:break-word; }
table.mini th { width:auto; color:var(--muted); }
.fix pre { background:#0f1720; color:#e6edf3; padding:12px 14px; border-radius:8px; overflow:auto;
  margin:6px 0; white-space:pre-wrap; }
.label { font-size:12px; font-weight:600; color:var(--muted); text-transform:uppercase;
  letter-spacing:.04em; margin-top:8px; }
.method, .caveat { color:var(--muted); font-size:12.5px; margin:6px 0 0; }
.caveat::before { content:"Caveat: "; font-weight:600; }
figure { margin:0 0 10px; } figure svg { width:100%; height:auto; }
figure.narrow svg { width:62%; }
.grid2 { display:grid; grid-template-columns:1fr 1fr; gap:22px; }
.empty { color:var(--muted); font-style:italic; }
.slowest td { background:#fff4e5; }
ol.how li { margin:4px 0; }
footer { color:var(--muted); font-size:12px; text-align:center; padding:0 0 30px; }
"""
