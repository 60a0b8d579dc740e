/**
 * Reading manifests for `apply`, `create`, `delete -f`, `diff`: files, directories (`.yaml`,
 * `.yml`, `.json`; `-R` recurses), or `-` for standard input; each file may hold several YAML
 * documents (or JSON), and a `kind: List` stands for its items. A malformed file is reported with
 * its path, line and column — the parse is pure (`parseText`), only the reading touches disk.
 */
import { readdirSync, readFileSync, statSync } from "node:fs"
import { join } from "node:path"
import { LineCounter, parseAllDocuments } from "yaml"
import { CliError } from "./CliError.js"

type Json = Record<string, unknown>

/** One object from a manifest, and where it came from. */
export interface Manifest {
  readonly source: string
  readonly object: Json
}

const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v)

/** The objects in one file's text, or a CliError naming `source`, line and column (pure). */
export const parseText = (source: string, text: string): ReadonlyArray<Manifest> => {
  const out: Array<Manifest> = []
  const lines = new LineCounter()
  for (const doc of parseAllDocuments(text, { prettyErrors: false, lineCounter: lines })) {
    const error = doc.errors[0]
    if (error !== undefined) {
      const pos = lines.linePos(error.pos[0])
      const where = pos === undefined ? "" : `line ${pos.line}, column ${pos.col}: `
      const message = error.message.replace(/ at line \d+, column \d+:?[\s\S]*$/, "")
      throw new CliError({ message: `error parsing ${source}: ${where}${message}` })
    }
    const value = doc.toJS() as unknown
    if (value === null || value === undefined) continue
    const line = doc.contents?.range ? lineOf(text, doc.contents.range[0]) : 1
    if (!isObject(value)) throw new CliError({ message: `error parsing ${source}: line ${line}: expected an object with apiVersion and kind` })
    if (value["kind"] === "List" || (typeof value["kind"] === "string" && value["kind"].endsWith("List") && Array.isArray(value["items"]))) {
      for (const item of value["items"] as Array<unknown>) if (isObject(item)) out.push({ source, object: item })
      continue
    }
    const missing = ["apiVersion", "kind"].filter((f) => typeof value[f] !== "string" || value[f] === "")
    if (missing.length > 0) {
      throw new CliError({ message: `error validating ${source}: line ${line}: ${missing.map((f) => `${f} not set`).join(", ")}` })
    }
    out.push({ source, object: value })
  }
  return out
}

const lineOf = (text: string, offset: number): number => text.slice(0, offset).split("\n").length

const manifestFile = /\.(ya?ml|json)$/i

/** The files a `-f` argument names (a directory lists its manifests, recursively with `recursive`). */
export const expand = (path: string, recursive: boolean): ReadonlyArray<string> => {
  let stat
  try {
    stat = statSync(path)
  } catch {
    throw new CliError({ message: `the path "${path}" does not exist` })
  }
  if (!stat.isDirectory()) return [path]
  return readdirSync(path, { withFileTypes: true })
    .sort((a, b) => a.name.localeCompare(b.name))
    .flatMap((e) => {
      const full = join(path, e.name)
      if (e.isDirectory()) return recursive ? expand(full, true) : []
      return manifestFile.test(e.name) ? [full] : []
    })
}

/** Read every manifest the `-f` arguments name, in order. */
export const read = (paths: ReadonlyArray<string>, recursive: boolean, stdin: () => string = () => readFileSync(0, "utf8")): ReadonlyArray<Manifest> => {
  if (paths.length === 0) throw new CliError({ message: "must specify one of -f and -k" })
  const out: Array<Manifest> = []
  for (const p of paths) {
    if (p === "-") out.push(...parseText("STDIN", stdin()))
    else for (const file of expand(p, recursive)) out.push(...parseText(file, readFileSync(file, "utf8")))
  }
  return out
}
