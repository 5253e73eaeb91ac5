/**
 * Pieces shared by the self-contained HTML pages (fleet report, two-snapshot diff): escaping,
 * breakable path text, the page frame with its Content-Security-Policy, the common CSS.
 *
 * @module
 */

/**
 * Escapes text for HTML content and attribute values.
 *
 * @param text any text
 * @returns the escaped text
 */
export function escapeHtml(text: string): string {
  return text.replace(
    /[&<>"']/g,
    (c) =>
      c === "&"
        ? "&amp;"
        : c === "<"
        ? "&lt;"
        : c === ">"
        ? "&gt;"
        : c === '"'
        ? "&quot;"
        : "&#39;",
  );
}

/**
 * Escapes a path and lets it wrap only after `.`, `/`, `_`, `-` or `=`, never inside a word
 * (`<wbr>` break opportunities; the CSS forbids breaking anywhere else).
 *
 * @param path a reading path or part of one
 * @returns HTML
 */
export function breakablePath(path: string): string {
  return escapeHtml(path).replace(/([./_=-])(?=[^./_=\d-])/g, "$1<wbr>");
}

/** CSS every page shares. */
const BASE_STYLE = `
*{box-sizing:border-box}
body{margin:0;font:13px/1.35 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d232a;background:#fff}
header{padding:12px 16px;border-bottom:1px solid #d0d7de;background:#f6f8fa}
h1{margin:0 0 4px;font-size:18px}
h2{font-size:15px;margin:18px 16px 6px}
h3{font-size:13px;margin:10px 16px 4px}
.sub{color:#57606a;margin:0}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-weight:600}
.badge.drift{background:#ffebe9;color:#a40e26;border:1px solid #ff818266}
.badge.clean{background:#dafbe1;color:#116329;border:1px solid #4ac26b66}
.mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px}
table.list{border-collapse:collapse;margin:0 16px}
table.list th,table.list td{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top}
table.list th{background:#f6f8fa}
td.num{text-align:right}
`;

/**
 * Wraps a body in a self-contained page: inline CSS only, and a Content-Security-Policy
 * that forbids loading anything.
 *
 * @param title the page title
 * @param style the page's CSS (after {@link BASE_STYLE})
 * @param body the body HTML
 * @returns the document
 */
export function htmlPage(title: string, style: string, body: string): string {
  return [
    `<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">`,
    `<meta name="viewport" content="width=device-width, initial-scale=1">`,
    `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">`,
    `<title>${escapeHtml(title)}</title>\n<style>${BASE_STYLE}${style}</style>\n</head>\n<body>`,
    body,
    `</body>\n</html>\n`,
  ].join("\n");
}
