/**
 * The `Warning` response header (RFC 7234 §5.5) as Kubernetes clients read it: the API server
 * sends admission's and deprecation warnings as `299 - "text"` values, several per header
 * (comma-joined) or several headers (which fetch joins with ", " anyway). Hand-written: the one
 * npm parser (`warning-header-parser`) is unmaintained and parses one value per header, and the
 * grammar is small; commas inside quoted texts are why a split on "," will not do.
 */

/** One warn-value. */
export interface Warning {
  /** The 3-digit warn-code (Kubernetes uses 299, "miscellaneous persistent warning"). */
  readonly code: number
  /** The warn-agent: `host[:port]` or a pseudonym (`-`). */
  readonly agent: string
  /** The warn-text with its quoted-pairs unescaped. */
  readonly text: string
  /** The optional warn-date, as sent (without its quotes). */
  readonly date?: string
}

/** What `parse` read: the well-formed values, and why the rest of a header was skipped. */
export interface Parsed {
  readonly warnings: ReadonlyArray<Warning>
  readonly errors: ReadonlyArray<string>
}

const isSpace = (c: string | undefined) => c === " " || c === "\t"

/** A quoted-string starting at `s[i]` (a `"`): its unescaped content and the index after it. */
const quoted = (s: string, i: number): { readonly value: string; readonly end: number } | string => {
  if (s[i] !== '"') return `expected '"' at ${i}`
  let value = ""
  for (let j = i + 1; j < s.length; j++) {
    const c = s[j]!
    if (c === "\\") {
      if (j + 1 >= s.length) return "unterminated escape"
      value += s[++j]
    } else if (c === '"') return { value, end: j + 1 }
    else value += c
  }
  return "unterminated quoted text"
}

/** One header value: every warn-value until the end or the first malformed one (the rest of the value is skipped, as client-go does). */
const parseValue = (s: string, warnings: Array<Warning>, errors: Array<string>): void => {
  let i = 0
  for (;;) {
    while (isSpace(s[i]) || s[i] === ",") i++
    if (i >= s.length) return
    const code = /^(\d{3}) /.exec(s.slice(i, i + 4))
    if (code === null) return void errors.push(`invalid warn-code in ${JSON.stringify(s.slice(i, i + 20))}`)
    i += 4
    const agentEnd = s.indexOf(" ", i)
    if (agentEnd <= i) return void errors.push("missing warn-agent")
    const agent = s.slice(i, agentEnd)
    const text = quoted(s, agentEnd + 1)
    if (typeof text === "string") return void errors.push(`invalid warn-text: ${text}`)
    i = text.end
    let date: string | undefined
    if (s[i] === " " && s[i + 1] === '"') {
      const d = quoted(s, i + 1)
      if (typeof d === "string") return void errors.push(`invalid warn-date: ${d}`)
      date = d.value
      i = d.end
    }
    while (isSpace(s[i])) i++
    if (i < s.length && s[i] !== ",") return void errors.push(`unexpected ${JSON.stringify(s[i])} after a warning`)
    warnings.push({ code: Number(code[1]), agent, text: text.value, ...(date === undefined ? {} : { date }) })
  }
}

/** Parse `Warning` header values (one string, possibly comma-joined, or one per header). */
export const parse = (values: string | ReadonlyArray<string> | null | undefined): Parsed => {
  const warnings: Array<Warning> = []
  const errors: Array<string> = []
  for (const v of values === null || values === undefined ? [] : typeof values === "string" ? [values] : values) parseValue(v, warnings, errors)
  return { warnings, errors }
}

/**
 * The texts a client shows: code 299 with a non-empty text, as client-go's warning writer prints
 * them (other codes are HTTP caches' notes, not the API server's).
 */
export const messages = (values: string | ReadonlyArray<string> | null | undefined): ReadonlyArray<string> =>
  parse(values).warnings.filter((w) => w.code === 299 && w.text !== "").map((w) => w.text)
