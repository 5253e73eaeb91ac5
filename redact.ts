/**
 * Credentials never reach a message or a log line: a URL's user information becomes `***`
 * (`https://***@host/path`) and each query value becomes `***` (`?token=***`), whether the URL
 * is a source the user named ({@link redactUrl}) or appears inside any text, such as a library's
 * error message ({@link redactSecrets}, which the logger and the error printer apply to every
 * line).
 *
 * Nothing else of a URL changes: the host, path and query names stay, so a message still says
 * which server and which resource.
 *
 * @module
 */

/** What stands in for a credential or a query value. */
export const REDACTED = "***";

/** A scheme and `//`: where a URL starts inside text (RFC 3986 scheme characters). */
const URL_START_REGEXP = /[A-Za-z][A-Za-z0-9+.-]*:\/\//g;

/**
 * Redacts one URL given as text: its user information and its query values. The text is not
 * parsed into a URL object (which would normalise it), so what is left reads as it was typed.
 *
 * @param url the URL as given
 * @returns the URL with `***` for the user information and for each query value
 * @example Redacting a URL
 * ```ts
 * import { redactUrl } from "./redact.ts";
 * redactUrl("https://me:pw@example.com/s.yaml?token=abc&fresh"); // "https://***@example.com/s.yaml?token=***&fresh"
 * ```
 */
export function redactUrl(url: string): string {
  const scheme = url.indexOf("://");
  if (scheme < 0) return url;
  return url.slice(0, scheme + 3) + redactAfterScheme(url.slice(scheme + 3)).text;
}

/**
 * Redacts every URL inside a text (see {@link redactUrl}); text without `://` is returned as
 * it is, at the cost of one search.
 *
 * @param text any message
 * @returns the text with each URL's credentials and query values replaced by `***`
 */
export function redactSecrets(text: string): string {
  if (!text.includes("://")) return text;
  let out = "";
  let from = 0;
  URL_START_REGEXP.lastIndex = 0;
  for (;;) {
    const match = URL_START_REGEXP.exec(text);
    if (!match) break;
    const start = match.index + match[0].length;
    const end = urlEnd(text, match.index, start);
    const redacted = redactAfterScheme(text.slice(start, end));
    out += text.slice(from, start) + redacted.text;
    from = end;
    URL_START_REGEXP.lastIndex = end;
  }
  return out + text.slice(from);
}

/** The closer of a quote or bracket that may wrap a URL inside text. */
const CLOSERS: Record<string, string> = { "'": "'", "(": ")", "[": "]", "{": "}" };

/**
 * Where a URL whose scheme starts at `schemeAt` (its rest at `start`) ends inside text: at white
 * space, or at the last closer of the quote or bracket before it (`'https://…': …`), or before
 * trailing punctuation.
 */
function urlEnd(text: string, schemeAt: number, start: number): number {
  let end = start;
  while (end < text.length && !/[\s"<>`]/.test(text[end] as string)) end++;
  const closer = CLOSERS[text[schemeAt - 1] ?? ""];
  if (closer !== undefined) {
    const closed = text.lastIndexOf(closer, end - 1);
    if (closed >= start) return closed;
  }
  while (end > start && /[',.;:!?)\]}]/.test(text[end - 1] as string)) end--;
  return end;
}

/**
 * Redacts what follows `scheme://`: the user information, then each query value. The user
 * information ends at the last `@` before the query: a password typed with a `/` in it is
 * still hidden (an `@` in a path costs the host's name in the message instead, the safe side).
 */
function redactAfterScheme(rest: string): { text: string } {
  const beforeQuery = firstOf(rest, "?#");
  const at = rest.lastIndexOf("@", beforeQuery - 1);
  const afterUser = at < 0 ? rest : rest.slice(at + 1);
  const authorityEnd = firstOf(afterUser, "/?#");
  const host = (at < 0 ? "" : `${REDACTED}@`) + afterUser.slice(0, authorityEnd);
  const tail = afterUser.slice(authorityEnd);
  const query = tail.indexOf("?");
  if (query < 0) return { text: host + tail };
  const hash = tail.indexOf("#", query);
  const queryEnd = hash < 0 ? tail.length : hash;
  const params = tail.slice(query + 1, queryEnd).split("&").map((param) => {
    const equals = param.indexOf("=");
    return equals < 0 ? param : `${param.slice(0, equals)}=${REDACTED}`;
  });
  return { text: host + tail.slice(0, query + 1) + params.join("&") + tail.slice(queryEnd) };
}

/** The index of the first of some characters, or the length. */
function firstOf(text: string, characters: string): number {
  for (let i = 0; i < text.length; i++) {
    if (characters.includes(text[i] as string)) return i;
  }
  return text.length;
}
