/**
 * Reading and editing kubeconfig files, as kubectl does: the file is `--kubeconfig`, else the
 * `KUBECONFIG` list (colon-separated, merged, the first file to define a name wins), else
 * `~/.koder-fleet/kubeconfig` (what `koder-fleet dev` writes), else `~/.kube/config`. Resolving a
 * context is pure (`resolve`); edits (`use-context`, `set-context`) keep the rest of the file,
 * comments included, by going through the `yaml` document model.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { homedir } from "node:os"
import { delimiter, join } from "node:path"
import { isMap, isSeq, parse, parseDocument } from "yaml"
import { CliError } from "./CliError.js"

type Json = Record<string, unknown>

/** A named entry of a kubeconfig list. */
interface Named<A> {
  readonly name: string
  readonly value: A
}

/** A kubeconfig, merged from one or more files. */
export interface Kubeconfig {
  /** The files it came from, in precedence order (edits go to the first). */
  readonly files: ReadonlyArray<string>
  readonly currentContext: string | undefined
  readonly clusters: ReadonlyArray<Named<Json>>
  readonly users: ReadonlyArray<Named<Json>>
  readonly contexts: ReadonlyArray<Named<Json>>
}

/** What a client needs to reach the API. */
export interface Target {
  readonly context: string
  readonly server: string
  readonly namespace: string
  readonly caPem?: string
  readonly token?: string
  readonly certPem?: string
  readonly keyPem?: string
  readonly insecure: boolean
}

/** Flags that override the kubeconfig. */
export interface Overrides {
  readonly kubeconfig?: string | undefined
  readonly context?: string | undefined
  readonly namespace?: string | undefined
  readonly server?: string | undefined
  readonly token?: string | undefined
  readonly insecureSkipTlsVerify?: boolean | undefined
}

const obj = (v: unknown): Json => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Json) : {})
const str = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined)

/** The files to read, by kubectl's precedence (pure apart from `exists`). */
export const locate = (
  flag: string | undefined,
  env: NodeJS.ProcessEnv,
  home: string,
  exists: (path: string) => boolean = existsSync
): ReadonlyArray<string> => {
  if (flag) return [flag]
  const fromEnv = (env["KUBECONFIG"] ?? "").split(delimiter).filter((p) => p !== "")
  if (fromEnv.length > 0) return fromEnv
  const candidates = [join(env["FLEET_DATA_DIR"] ?? join(home, ".koder-fleet"), "kubeconfig"), join(home, ".kube", "config")]
  const found = candidates.find(exists)
  return [found ?? candidates[0]!]
}

const entries = (doc: Json, list: string, field: string): Array<Named<Json>> =>
  (Array.isArray(doc[list]) ? (doc[list] as Array<unknown>) : [])
    .map(obj)
    .filter((e) => str(e["name"]) !== undefined)
    .map((e) => ({ name: String(e["name"]), value: obj(e[field]) }))

/** Merge parsed kubeconfig documents (the first to name an entry wins, as kubectl merges). */
export const merge = (files: ReadonlyArray<string>, docs: ReadonlyArray<Json>): Kubeconfig => {
  const pick = (list: string, field: string) => {
    const seen = new Map<string, Named<Json>>()
    for (const doc of docs) for (const e of entries(doc, list, field)) if (!seen.has(e.name)) seen.set(e.name, e)
    return [...seen.values()]
  }
  return {
    files,
    currentContext: docs.map((d) => str(d["current-context"])).find((c) => c !== undefined),
    clusters: pick("clusters", "cluster"),
    users: pick("users", "user"),
    contexts: pick("contexts", "context")
  }
}

/** Read the kubeconfig files (missing files are empty). */
export const load = (flag: string | undefined, env: NodeJS.ProcessEnv = process.env): Kubeconfig => {
  const files = locate(flag, env, homedir())
  const docs = files.map((file) => {
    if (!existsSync(file)) return {}
    try {
      return obj(parse(readFileSync(file, "utf8")))
    } catch (e) {
      throw new CliError({ message: `error loading config file "${file}": ${e instanceof Error ? e.message : String(e)}` })
    }
  })
  return merge(files, docs)
}

const pem = (data: unknown, file: unknown, read: (path: string) => string): string | undefined => {
  const d = str(data)
  if (d !== undefined) return Buffer.from(d, "base64").toString("utf8")
  const f = str(file)
  return f === undefined ? undefined : read(f)
}

/** Where the flags and the kubeconfig point (pure but for reading referenced files through `read`). */
export const resolve = (config: Kubeconfig, overrides: Overrides, read: (path: string) => string = (p) => readFileSync(p, "utf8")): Target => {
  const contextName = overrides.context ?? config.currentContext
  const context = contextName === undefined ? undefined : config.contexts.find((c) => c.name === contextName)
  if (overrides.context !== undefined && context === undefined) throw new CliError({ message: `context "${overrides.context}" does not exist` })
  const cluster = config.clusters.find((c) => c.name === str(context?.value["cluster"]))?.value ?? {}
  const user = config.users.find((u) => u.name === str(context?.value["user"]))?.value ?? {}
  const server = overrides.server ?? str(cluster["server"])
  if (server === undefined) {
    throw new CliError({
      message:
        config.files.length === 1 && !existsSync(config.files[0]!)
          ? `no kubeconfig at ${config.files[0]} (start a cluster with \`npm start\` / \`koder-fleet dev\`, or pass --kubeconfig or --server)`
          : `the server is not set: the kubeconfig (${config.files.join(", ")}) has no current context with a cluster; pass --context or --server`
    })
  }
  const tokenFile = str(user["tokenFile"])
  const token = overrides.token ?? str(user["token"]) ?? (tokenFile === undefined ? undefined : read(tokenFile).trim())
  const caPem = pem(cluster["certificate-authority-data"], cluster["certificate-authority"], read)
  const certPem = pem(user["client-certificate-data"], user["client-certificate"], read)
  const keyPem = pem(user["client-key-data"], user["client-key"], read)
  return {
    context: contextName ?? "",
    server: server.replace(/\/+$/, ""),
    namespace: overrides.namespace ?? str(context?.value["namespace"]) ?? "default",
    insecure: overrides.insecureSkipTlsVerify ?? cluster["insecure-skip-tls-verify"] === true,
    ...(caPem === undefined ? {} : { caPem }),
    ...(token === undefined ? {} : { token }),
    ...(certPem === undefined ? {} : { certPem }),
    ...(keyPem === undefined ? {} : { keyPem })
  }
}

/** The rows of `config get-contexts`: current marker, name, cluster, user, namespace. */
export const contextRows = (config: Kubeconfig): Array<Array<string>> =>
  config.contexts.map((c) => [
    c.name === config.currentContext ? "*" : "",
    c.name,
    str(c.value["cluster"]) ?? "",
    str(c.value["user"]) ?? "",
    str(c.value["namespace"]) ?? ""
  ])

/** Set `current-context` in a kubeconfig's text, keeping the rest. */
export const withCurrentContext = (text: string, name: string): string => {
  const doc = parseDocument(text)
  doc.set("current-context", name)
  return doc.toString()
}

/** Set fields of a context (created when missing) in a kubeconfig's text, keeping the rest. */
export const withContextFields = (text: string, name: string, fields: Readonly<Record<string, string>>): string => {
  const doc = parseDocument(text === "" ? "apiVersion: v1\nkind: Config\n" : text)
  let contexts = doc.get("contexts")
  if (!isSeq(contexts)) {
    doc.set("contexts", [])
    contexts = doc.get("contexts")
  }
  if (!isSeq(contexts)) throw new CliError({ message: "the kubeconfig's contexts is not a list" })
  let index = contexts.items.findIndex((item) => isMap(item) && item.get("name") === name)
  if (index < 0) {
    contexts.add(doc.createNode({ name, context: {} }))
    index = contexts.items.length - 1
  }
  for (const [k, v] of Object.entries(fields)) doc.setIn(["contexts", index, "context", k], v)
  return doc.toString()
}

/** Rewrite the first kubeconfig file through `edit`. */
export const editFile = (config: Kubeconfig, edit: (text: string) => string): string => {
  const file = config.files[0]!
  const text = existsSync(file) ? readFileSync(file, "utf8") : ""
  writeFileSync(file, edit(text), { mode: 0o600 })
  return file
}
