/**
 * `kfleet get`: tables the server renders (`meta.k8s.io/v1` Table, as kubectl asks for them),
 * or objects in any `-o` format; `-l`, `--field-selector`, `-A`, several types at once
 * (`pods,svc`, `all`), `type/name` arguments, and `-w` streaming a row per change after the first
 * table.
 */
import { Client } from "@koder/fleet-core"
import type { Command } from "commander"
import { Effect, Stream } from "effect"
import { usage } from "../CliError.js"
import { arr, examples, meta, obj, refOf, type Env } from "../Cli.js"
import { tableAccept } from "../Connection.js"
import * as Printers from "../Printers.js"
import * as Resources from "../Resources.js"
import type { Session, Terminal } from "../Run.js"

type Json = Record<string, unknown>

/** `get`'s flags. */
export interface GetOptions {
  readonly output?: string
  readonly selector?: string
  readonly fieldSelector?: string
  readonly allNamespaces?: boolean
  readonly watch?: boolean
  readonly watchOnly?: boolean
  readonly noHeaders?: boolean
  readonly showLabels?: boolean
  /** On a hub: every member's objects, through the hub's aggregated read. */
  readonly allMembers?: boolean
}

/** The hub's aggregated read of one type across its members (pure). */
export const aggregatePath = (info: Pick<Resources.ResourceInfo, "group" | "version" | "plural">, namespace: string | undefined): string =>
  `/apis/federation.fleet.koder.dev/v1alpha1/aggregate/${info.group === "" ? "core" : info.group}/${info.version}/${namespace === undefined ? "" : `namespaces/${namespace}/`}${info.plural}`

const query = (o: { readonly selector?: string | undefined; readonly fieldSelector?: string | undefined }) => {
  const q = new URLSearchParams()
  if (o.selector) q.set("labelSelector", o.selector)
  if (o.fieldSelector) q.set("fieldSelector", o.fieldSelector)
  const s = q.toString()
  return s === "" ? "" : `?${s}`
}

/** One type to print and the request that fetches it. */
interface Fetch {
  readonly info: Resources.ResourceInfo
  readonly namespace: string | undefined
  readonly names: ReadonlyArray<string>
}

/** Which requests a `get` makes (pure but for the throw of a usage error). */
export const plan = (resources: ReadonlyArray<Resources.ResourceInfo>, args: ReadonlyArray<string>, namespace: string, allNamespaces: boolean): ReadonlyArray<Fetch> => {
  const pairs = Resources.parseArgs(args)
  if (pairs.length === 0) throw usage("You must specify the type of resource to get. Use \"kfleet api-resources\" for a complete list of supported resources.", "get")
  return pairs.flatMap(({ type, names }) => {
    const infos = Resources.lookup(resources, type)
    if (infos.length === 0) throw usage(`the server doesn't have a resource type "${type}"`)
    return infos.map((info) => ({ info, names, namespace: info.namespaced ? (allNamespaces && names.length === 0 ? undefined : namespace) : undefined }))
  })
}

/** Objects of one fetch (plain JSON), with apiVersion and kind filled in as kubectl does. */
const fetchObjects = (s: Session, f: Fetch, o: GetOptions) =>
  Effect.gen(function* () {
    const fill = (x: Json): Json => ({ apiVersion: f.info.apiVersion, kind: f.info.kind, ...x })
    if (o.allMembers === true) return Printers.itemsOf(yield* s.conn.json("GET", `${aggregatePath(f.info, f.namespace)}${query(o)}`)).map(fill)
    if (f.names.length > 0) return yield* Effect.forEach(f.names, (n) => Effect.map(s.conn.client.get(refOf(f.info), f.namespace, n), fill))
    const list = yield* s.conn.client.listAll(refOf(f.info), {
      ...(f.namespace === undefined ? {} : { namespace: f.namespace }),
      ...(o.selector ? { labelSelector: o.selector } : {}),
      ...(o.fieldSelector ? { fieldSelector: o.fieldSelector } : {})
    })
    return list.items.map(fill)
  })

/** A server Table for one fetch (names fetched one by one, rows concatenated). */
const fetchTable = (s: Session, f: Fetch, o: GetOptions) =>
  Effect.gen(function* () {
    const get = (path: string) => s.conn.json("GET", path, { accept: tableAccept })
    const tables =
      o.allMembers === true
        ? [yield* get(`${aggregatePath(f.info, f.namespace)}${query(o)}`)]
        : f.names.length > 0
        ? yield* Effect.forEach(f.names, (n) => get(Client.path(refOf(f.info), f.namespace, n)))
        : [yield* get(`${Client.path(refOf(f.info), f.namespace)}${query(o)}`)]
    const asTable = (t: Json): Printers.ServerTable =>
      t["kind"] === "Table"
        ? (t as unknown as Printers.ServerTable)
        : {
            // Not every endpoint renders Tables: fall back to names.
            columnDefinitions: [{ name: "Name" }],
            rows: (Array.isArray(t["items"]) ? Printers.itemsOf(t) : [t]).map((x) => ({ cells: [meta(x)["name"]], object: x }))
          }
    const all = tables.map(asTable)
    return {
      columnDefinitions: all[0]?.columnDefinitions ?? [],
      rows: all.flatMap((t) => t.rows),
      resourceVersion: String(obj(tables[tables.length - 1]?.["metadata"])["resourceVersion"] ?? "")
    }
  })

const where = (s: Session, o: GetOptions) => (o.allNamespaces ? "" : ` in ${s.namespace} namespace`)

/** Run `get`. */
const get = (s: Session, t: Terminal, args: ReadonlyArray<string>, o: GetOptions) =>
  Effect.gen(function* () {
    const format = Printers.parseFormat(o.output)
    const fetches = plan(yield* s.resources(), args, s.namespace, o.allNamespaces === true)
    if (o.allMembers === true && (o.watch || o.watchOnly)) return yield* Effect.fail(usage("--all-members lists once: watch one member through the hub's proxy (kfleet --server HUB/apis/federation.fleet.koder.dev/v1alpha1/memberclusters/NAME/proxy get -w ...)"))
    if (o.allMembers === true && fetches.some((f) => f.names.length > 0)) return yield* Effect.fail(usage("--all-members lists: select with -l or --field-selector metadata.name=NAME instead of names"))
    const single = fetches.length === 1 && fetches[0]!.names.length === 1
    if (format._tag !== "Table") {
      if (o.watch || o.watchOnly) {
        if (fetches.length !== 1) return yield* Effect.fail(usage("you may only specify a single resource type with --watch"))
        // The watch starts with a list of its own: every current object arrives as ADDED first.
        return yield* watchObjects(s, t, fetches[0]!, o, format)
      }
      const objects = (yield* Effect.forEach(fetches, (f) => fetchObjects(s, f, o))).flat()
      if (objects.length === 0 && format._tag !== "Yaml" && format._tag !== "Json") {
        t.err(`No resources found${where(s, o)}.\n`)
        return
      }
      const typeOf = (x: Json) => Resources.typeName({ kind: String(x["kind"]), group: String(x["apiVersion"]).includes("/") ? String(x["apiVersion"]).split("/")[0]! : "" })
      t.out(Printers.objects(format, objects, typeOf, single, o.noHeaders))
      return
    }
    const several = fetches.length > 1
    const blocks: Array<string> = []
    let widths: ReadonlyArray<Array<string>> = []
    let firstTable: { rows: ReadonlyArray<unknown>; resourceVersion: string } | undefined
    for (const f of fetches) {
      const table = yield* fetchTable(s, f, o)
      firstTable ??= table
      if (table.rows.length === 0 && several) continue
      const rows = Printers.tableRows(table, {
        wide: format.wide,
        withNamespace: o.allNamespaces === true && f.info.namespaced,
        noHeaders: o.noHeaders === true,
        showLabels: o.showLabels === true,
        ...(several ? { namePrefix: `${Resources.typeName(f.info)}/` } : {})
      })
      widths = rows
      if (table.rows.length > 0 && !o.watchOnly) blocks.push(Printers.align(rows))
    }
    if (o.watch || o.watchOnly) {
      if (fetches.length !== 1) return yield* Effect.fail(usage("you may only specify a single resource type with --watch"))
      if (blocks.length > 0) t.out(`${blocks[0]}\n`)
      return yield* watchTable(s, t, fetches[0]!, o, format.wide, widths, firstTable?.resourceVersion ?? "")
    }
    if (blocks.length === 0) {
      t.err(`No resources found${where(s, o)}.\n`)
      return
    }
    t.out(`${blocks.join("\n\n")}\n`)
  })

const watchOptions = (f: Fetch, o: GetOptions, resourceVersion?: string): Client.WatchOptions => ({
  ...(f.namespace === undefined ? {} : { namespace: f.namespace }),
  ...(o.selector ? { labelSelector: o.selector } : {}),
  ...(o.fieldSelector ? { fieldSelector: o.fieldSelector } : {}),
  ...(resourceVersion === undefined || resourceVersion === "" ? {} : { resourceVersion })
})

const named = (f: Fetch, x: Json) => f.names.length === 0 || f.names.includes(String(meta(x)["name"]))

/** Stream a table row per change, aligned with the rows printed before. */
const watchTable = (s: Session, t: Terminal, f: Fetch, o: GetOptions, wide: boolean, before: ReadonlyArray<Array<string>>, resourceVersion: string) =>
  Effect.gen(function* () {
    const lastRows = new Map<string, Array<string>>()
    const widths = (before[0] ?? []).map((_, i) => Math.max(...before.map((r) => r[i]?.length ?? 0)))
    let headerPrinted = before.length > 0 || o.noHeaders === true
    const line = (cells: ReadonlyArray<string>) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0))).join("   ").trimEnd()
    const print = (cells: ReadonlyArray<string>) => {
      cells.forEach((c, i) => (widths[i] = Math.max(widths[i] ?? 0, c.length)))
      t.out(`${line(cells)}\n`)
    }
    yield* s.conn.client.watch(refOf(f.info), watchOptions(f, o, resourceVersion)).pipe(
      Stream.filter((e) => named(f, e.object)),
      Stream.runForEach((e) =>
        Effect.gen(function* () {
          const m = meta(e.object)
          const key = `${String(m["namespace"] ?? "")}/${String(m["name"])}`
          let rows: Array<Array<string>> | undefined
          if (e.type !== "DELETED" || !lastRows.has(key)) {
            const table = yield* Effect.either(s.conn.json("GET", Client.path(refOf(f.info), m["namespace"] as string | undefined, String(m["name"])), { accept: tableAccept }))
            if (table._tag === "Right" && table.right["kind"] === "Table") {
              rows = Printers.tableRows(table.right as unknown as Printers.ServerTable, { wide, withNamespace: o.allNamespaces === true && f.info.namespaced, showLabels: o.showLabels === true })
            }
          }
          const cells = rows?.[1] ?? lastRows.get(key) ?? [String(m["name"])]
          if (!headerPrinted && rows?.[0] !== undefined) {
            headerPrinted = true
            rows[0].forEach((c, i) => (widths[i] = Math.max(widths[i] ?? 0, c.length, cells[i]?.length ?? 0)))
            print(rows[0])
          }
          lastRows.set(key, cells)
          print(cells)
        })
      )
    )
  })

/** Stream objects in a non-table format, one per change. */
const watchObjects = (s: Session, t: Terminal, f: Fetch, o: GetOptions, format: Exclude<Printers.Format, { _tag: "Table" }>) =>
  s.conn.client.watch(refOf(f.info), watchOptions(f, o)).pipe(
    Stream.filter((e) => named(f, e.object)),
    Stream.runForEach((e) =>
      Effect.sync(() => {
        const x = { apiVersion: f.info.apiVersion, kind: f.info.kind, ...e.object }
        const text = Printers.objects(format, [x], () => Resources.typeName(f.info), true, true)
        t.out(format._tag === "Yaml" ? `---\n${text}` : text)
      })
    )
  )

/** Register `get`. */
export const register = (program: Command, env: Env): void => {
  const cmd = program
    .command("get")
    .description("Display one or many resources")
    .argument("[resources...]", "TYPE[.GROUP] [NAME...] or TYPE/NAME ...")
    .option("-o, --output <format>", "output format: wide, yaml, json, name, jsonpath=TEMPLATE, custom-columns=SPEC")
    .option("-l, --selector <selector>", "label selector (e.g. -l app=web,tier!=db)")
    .option("--field-selector <selector>", "field selector (e.g. --field-selector status.phase=Running)")
    .option("-A, --all-namespaces", "list across all namespaces")
    .option("-w, --watch", "after listing, watch for changes")
    .option("--watch-only", "watch for changes without listing first")
    .option("--no-headers", "don't print headers")
    .option("--show-labels", "show each object's labels as the last column")
    .option("--all-members", "on a hub: every member's objects, with a MEMBER column (the hub's aggregated read)")
    .action((args: Array<string>, opts: GetOptions & { headers?: boolean }, command: Command) =>
      env.act(command, (s, t) => get(s, t, args, { ...opts, noHeaders: opts.headers === false }))
    )
  examples(
    cmd,
    `
  kfleet get pods                                 # pods in the current namespace
  kfleet get pods -o wide                         # with IP and node
  kfleet get deploy,svc -l app=hello              # several types, by label
  kfleet get pods -A                              # every namespace
  kfleet get deployment/hello -o yaml             # one object as YAML
  kfleet get pods -o jsonpath='{.items[*].metadata.name}'
  kfleet get pods -o custom-columns=NAME:.metadata.name,NODE:.spec.nodeName
  kfleet get pods -w                              # stream changes
  kfleet get pods -A --all-members                # on a hub: every member's pods`
  )
}

/** Items of a list-ish JSON (used by other commands). */
export const items = (list: Json): ReadonlyArray<Json> => arr(list["items"]).map(obj)
