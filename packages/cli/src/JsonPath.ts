/**
 * kubectl's JSONPath templates (`-o jsonpath='{.items[*].metadata.name}'`): literal text with
 * `{expression}` blocks, `{range EXPR}...{end}` loops, quoted literals (`{"\n"}`), several results
 * printed space-separated, strings raw and everything else as JSON. The expressions themselves
 * are evaluated by `jsonpath-plus` (filters such as `[?(@.type=="Ready")]` included), each
 * relative to the current node, as kubectl's are.
 */
import { JSONPath } from "jsonpath-plus"
import { usage } from "./CliError.js"

type Node =
  | { readonly _tag: "Text"; readonly text: string }
  | { readonly _tag: "Expr"; readonly path: string }
  | { readonly _tag: "Range"; readonly path: string; readonly body: ReadonlyArray<Node> }

const unquote = (s: string): string => JSON.parse(s.startsWith("'") ? `"${s.slice(1, -1).replace(/"/g, '\\"')}"` : s) as string

/** Parse a template (pure; a malformed one is a usage error). */
export const parse = (template: string): ReadonlyArray<Node> => {
  const root: Array<Node> = []
  const stack: Array<{ path: string; body: Array<Node> }> = []
  const out = () => (stack.length > 0 ? stack[stack.length - 1]!.body : root)
  let i = 0
  while (i < template.length) {
    const open = template.indexOf("{", i)
    if (open < 0) {
      out().push({ _tag: "Text", text: template.slice(i) })
      break
    }
    if (open > i) out().push({ _tag: "Text", text: template.slice(i, open) })
    // Find the matching close brace, skipping quoted strings.
    let j = open + 1
    let quote: string | undefined
    for (; j < template.length; j++) {
      const ch = template[j]!
      if (quote) {
        if (ch === "\\") j++
        else if (ch === quote) quote = undefined
      } else if (ch === '"' || ch === "'") quote = ch
      else if (ch === "}") break
    }
    if (j >= template.length) throw usage(`error parsing jsonpath ${template}, unclosed action`)
    const inner = template.slice(open + 1, j).trim()
    i = j + 1
    if (/^range\s/.test(inner)) stack.push({ path: inner.slice(6).trim(), body: [] })
    else if (inner === "end") {
      const r = stack.pop()
      if (!r) throw usage(`error parsing jsonpath ${template}, not in range, nothing to end`)
      out().push({ _tag: "Range", path: r.path, body: r.body })
    } else if (/^(".*"|'.*')$/s.test(inner)) out().push({ _tag: "Text", text: unquote(inner) })
    else out().push({ _tag: "Expr", path: inner })
  }
  if (stack.length > 0) throw usage(`error parsing jsonpath ${template}, unclosed range`)
  return root
}

/** Evaluate one expression against `node` (pure). */
export const evaluate = (path: string, node: unknown): ReadonlyArray<unknown> => {
  if (path === "" || path === "." || path === "@" || path === "$") return [node]
  const p = path.startsWith("$") ? path : path.startsWith("@") ? `$${path.slice(1)}` : path.startsWith(".") || path.startsWith("[") ? `$${path}` : `$.${path}`
  return JSONPath({ path: p, json: node as object, wrap: true, eval: "safe" }) as Array<unknown>
}

const show = (v: unknown): string => (typeof v === "string" ? v : v === undefined ? "" : JSON.stringify(v))

const run = (nodes: ReadonlyArray<Node>, data: unknown): string =>
  nodes
    .map((n) => {
      if (n._tag === "Text") return n.text
      if (n._tag === "Expr") return evaluate(n.path, data).map(show).join(" ")
      return evaluate(n.path, data).map((item) => run(n.body, item)).join("")
    })
    .join("")

/** Render `template` against `data` (pure). */
export const render = (template: string, data: unknown): string => run(parse(template), data)
