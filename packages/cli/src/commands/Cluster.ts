/**
 * Verbs about the cluster and the caller rather than one workload: `api-resources`, `explain`
 * (from the server's OpenAPI v3), `auth can-i` (SelfSubjectAccessReview), `wait`, `version`,
 * `placement` (the scheduler's explanation, a Fleet subresource) and `edit` (`$EDITOR`, then a
 * compare-and-swap update).
 */
import { spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Client } from "@koder/fleet-core"
import type { Command } from "commander"
import { Effect } from "effect"
import { parse } from "yaml"
import * as Age from "../Age.js"
import { CliError, usage } from "../CliError.js"
import { arr, examples, meta, obj, refOf, str, type Env } from "../Cli.js"
import { version } from "../index.js"
import * as Explain from "../Explain.js"
import * as JsonPath from "../JsonPath.js"
import * as Printers from "../Printers.js"
import * as Resources from "../Resources.js"
import type { Session, Terminal } from "../Run.js"

type Json = Record<string, unknown>

const apiResources = (s: Session, t: Terminal, o: { namespaced?: string; output?: string; apiGroup?: string }) =>
  Effect.gen(function* () {
    const rs = (yield* s.resources())
      .filter((r) => r.preferred)
      .filter((r) => o.namespaced === undefined || String(r.namespaced) === o.namespaced)
      .filter((r) => o.apiGroup === undefined || r.group === o.apiGroup)
      .sort((a, b) => a.group.localeCompare(b.group) || a.plural.localeCompare(b.plural))
    if (o.output === "name") {
      t.out(rs.map((r) => `${r.group === "" ? r.plural : `${r.plural}.${r.group}`}\n`).join(""))
      return
    }
    const wide = o.output === "wide"
    t.out(
      `${Printers.align([
        ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND", ...(wide ? ["VERBS"] : [])],
        ...rs.map((r) => [r.plural, r.shortNames.join(","), r.apiVersion, String(r.namespaced), r.kind, ...(wide ? [`[${r.verbs.join(" ")}]`] : [])])
      ])}\n`
    )
  })

const explain = (s: Session, t: Terminal, what: string, o: { recursive?: boolean; apiVersion?: string }) =>
  Effect.gen(function* () {
    const [type, ...fieldPath] = what.split(".")
    const info = Resources.resolveOne(yield* s.resources(), type!)
    const apiVersion = o.apiVersion ?? info.apiVersion
    const key = apiVersion.includes("/") ? `apis/${apiVersion}` : `api/${apiVersion}`
    const doc = yield* s.conn.json("GET", `/openapi/v3/${key}`)
    const text = Explain.render(doc, { group: info.group, version: apiVersion.split("/").pop()!, kind: info.kind }, fieldPath, o.recursive === true)
    if (typeof text !== "string") return yield* Effect.fail(new CliError({ message: text.error }))
    t.out(text)
  })

const canI = (s: Session, t: Terminal, verb: string, resource: string | undefined, name: string | undefined, o: { allNamespaces?: boolean; subresource?: string; quiet?: boolean }) =>
  Effect.gen(function* () {
    if (resource === undefined) return yield* Effect.fail(usage("you must specify two arguments: verb resource or verb resource/name", "auth can-i"))
    let attributes: Json
    if (resource.startsWith("/")) attributes = { nonResourceAttributes: { verb, path: resource } }
    else {
      const [type, slashName] = resource.includes("/") ? [resource.slice(0, resource.indexOf("/")), resource.slice(resource.indexOf("/") + 1)] : [resource, undefined]
      const found = type === "*" ? [] : Resources.lookup(yield* s.resources(), type)
      const info = found[0]
      attributes = {
        resourceAttributes: {
          verb,
          resource: info?.plural ?? type,
          group: info?.group ?? "",
          ...(o.allNamespaces ? {} : { namespace: s.namespace }),
          ...(o.subresource ? { subresource: o.subresource } : {}),
          ...((slashName ?? name) ? { name: slashName ?? name } : {})
        }
      }
    }
    const review = yield* s.conn.client.create({ apiVersion: "authorization.k8s.io/v1", kind: "SelfSubjectAccessReview", spec: attributes })
    const allowed = obj(review["status"])["allowed"] === true
    if (!o.quiet) t.out(`${allowed ? "yes" : "no"}\n`)
    if (!allowed) return yield* Effect.fail(new CliError({ message: "", exitCode: 1 }))
  })

/** What `wait --for` waits for (pure parse). */
export type WaitFor =
  | { readonly _tag: "Condition"; readonly type: string; readonly status: string }
  | { readonly _tag: "Delete" }
  | { readonly _tag: "JsonPath"; readonly path: string; readonly value: string | undefined }

/** Parse `--for` (pure). */
export const parseFor = (f: string): WaitFor => {
  if (f === "delete") return { _tag: "Delete" }
  if (f.startsWith("condition=")) {
    const rest = f.slice("condition=".length)
    const i = rest.indexOf("=")
    return i < 0 ? { _tag: "Condition", type: rest, status: "True" } : { _tag: "Condition", type: rest.slice(0, i), status: rest.slice(i + 1) }
  }
  if (f.startsWith("jsonpath=")) {
    const rest = f.slice("jsonpath=".length)
    const m = /^(\{.*\})(?:=(.*))?$/.exec(rest) ?? /^([^=]*)(?:=(.*))?$/.exec(rest)
    return { _tag: "JsonPath", path: m![1]!, value: m![2] }
  }
  throw usage(`unrecognized condition: "${f}" (use condition=NAME[=STATUS], delete or jsonpath='{PATH}'=VALUE)`, "wait")
}

/** Whether an object meets a wait condition (pure). */
export const met = (w: WaitFor, o: Json | undefined): boolean => {
  if (w._tag === "Delete") return o === undefined
  if (o === undefined) return false
  if (w._tag === "Condition") {
    return arr(obj(o["status"])["conditions"]).some((c) => str(obj(c)["type"]).toLowerCase() === w.type.toLowerCase() && str(obj(c)["status"]).toLowerCase() === w.status.toLowerCase())
  }
  const got = JsonPath.render(w.path.startsWith("{") ? w.path : `{${w.path}}`, o)
  return w.value === undefined ? got !== "" : got === w.value
}

const wait = (s: Session, t: Terminal, args: ReadonlyArray<string>, o: { for?: string; timeout?: string; selector?: string; all?: boolean }) =>
  Effect.gen(function* () {
    if (o.for === undefined) return yield* Effect.fail(usage("--for must be specified", "wait"))
    const w = parseFor(o.for)
    const timeout = Age.parseDuration(o.timeout ?? "30s") ?? 30
    const pairs = Resources.parseArgs(args)
    if (pairs.length === 0) return yield* Effect.fail(usage("you must specify the resources to wait for", "wait"))
    const resources = yield* s.resources()
    const targets: Array<{ info: Resources.ResourceInfo; name: string }> = []
    for (const { type, names } of pairs) {
      const info = Resources.resolveOne(resources, type)
      if (names.length > 0) targets.push(...names.map((name) => ({ info, name })))
      else {
        const list = yield* s.conn.client.listAll(refOf(info), { ...(info.namespaced ? { namespace: s.namespace } : {}), ...(o.selector ? { labelSelector: o.selector } : {}) })
        targets.push(...list.items.map((x) => ({ info, name: str(meta(x)["name"]) })))
      }
    }
    if (targets.length === 0) return yield* Effect.fail(new CliError({ message: "no matching resources found" }))
    const deadline = Date.now() + timeout * 1000
    for (const x of targets) {
      for (;;) {
        const got = yield* Effect.either(s.conn.client.get(refOf(x.info), x.info.namespaced ? s.namespace : undefined, x.name))
        if (got._tag === "Left" && got.left.status.code !== 404) return yield* Effect.fail(got.left)
        const object = got._tag === "Right" ? got.right : undefined
        if (met(w, object)) {
          t.out(`${Resources.typeName(x.info)}/${x.name} ${w._tag === "Delete" ? "deleted" : "condition met"}\n`)
          break
        }
        if (object === undefined && w._tag !== "Delete") return yield* Effect.fail(new CliError({ message: `${x.info.plural}${x.info.group === "" ? "" : `.${x.info.group}`} "${x.name}" not found` }))
        if (Date.now() > deadline) return yield* Effect.fail(new CliError({ message: `timed out waiting for the condition on ${x.info.plural}/${x.name}` }))
        yield* Effect.sleep("250 millis")
      }
    }
  })

const showVersion = (s: Session, t: Terminal, o: { output?: string }) =>
  Effect.gen(function* () {
    const server = yield* s.conn.json("GET", "/version")
    if (o.output === "json" || o.output === "yaml") {
      const doc = { clientVersion: { gitVersion: `v${version}` }, serverVersion: server }
      t.out(o.output === "json" ? Printers.json(doc) : Printers.yaml(doc))
      return
    }
    t.out(`Client Version: v${version}\nServer Version: ${str(server["gitVersion"])}\n`)
  })

const placement = (s: Session, t: Terminal, pod: string, o: { output?: string }) =>
  Effect.gen(function* () {
    const name = pod.replace(/^(pod|pods|po)\//, "")
    const p = yield* s.conn.json("GET", Client.path({ apiVersion: "v1", plural: "pods", namespaced: true }, s.namespace, name, "placement"))
    if (o.output === "json" || o.output === "yaml") {
      t.out(o.output === "json" ? Printers.json(p) : Printers.yaml(p))
      return
    }
    const nodes = arr(p["nodes"]).map(obj)
    const head = [
      `Pod:        ${s.namespace}/${name}`,
      `Result:     ${str(p["result"])}${p["node"] !== undefined ? ` (node ${str(p["node"])})` : ""}`,
      ...(p["message"] !== undefined ? [`Message:    ${str(p["message"])}`] : []),
      ...(p["evaluatedNodes"] !== undefined ? [`Evaluated:  ${str(p["evaluatedNodes"])} node(s), ${str(p["feasibleNodes"] ?? 0)} feasible`] : []),
      ...(p["nominatedNode"] !== undefined ? [`Nominated:  ${str(p["nominatedNode"])} (preempting ${arr(p["victims"]).map((v) => `${str(obj(v)["namespace"])}/${str(obj(v)["name"])}`).join(", ")})`] : [])
    ]
    const rows = nodes.map((n) => [
      str(n["node"]),
      str(n["verdict"]),
      n["total"] === undefined ? "" : String(n["total"]),
      n["scores"] !== undefined
        ? Object.entries(obj(n["scores"])).map(([plugin, sc]) => `${plugin}=${str(obj(sc)["score"])}×${str(obj(sc)["weight"])}`).join(" ")
        : [str(n["plugin"]), arr(n["reasons"]).map(str).join("; ")].filter((x) => x !== "").join(": ")
    ])
    t.out(`${head.join("\n")}\n${rows.length > 0 ? `\n${Printers.align([["NODE", "VERDICT", "SCORE", "DETAILS"], ...rows])}\n` : ""}`)
  })

const edit = (s: Session, t: Terminal, args: ReadonlyArray<string>, o: { output?: string }) =>
  Effect.gen(function* () {
    const pairs = Resources.parseArgs(args)
    if (pairs.length !== 1 || pairs[0]!.names.length !== 1) return yield* Effect.fail(usage("edit takes one object: TYPE NAME or TYPE/NAME", "edit"))
    const info = Resources.resolveOne(yield* s.resources(), pairs[0]!.type)
    const name = pairs[0]!.names[0]!
    const ns = info.namespaced ? s.namespace : undefined
    const live = { apiVersion: info.apiVersion, kind: info.kind, ...(yield* s.conn.client.get(refOf(info), ns, name)) }
    const asJson = o.output === "json"
    const before = asJson ? Printers.json(live) : `# Edit the object below; lines starting with '#' are ignored.\n# Save and quit to apply it; an empty file cancels.\n${Printers.yaml(live)}`
    const dir = mkdtempSync(join(tmpdir(), "kfleet-edit-"))
    const file = join(dir, `${info.plural}-${name}.${asJson ? "json" : "yaml"}`)
    writeFileSync(file, before)
    const editor = process.env["KUBE_EDITOR"] ?? process.env["EDITOR"] ?? "vi"
    const r = spawnSync(`${editor} "${file}"`, { stdio: "inherit", shell: true })
    if (r.status !== 0) return yield* Effect.fail(new CliError({ message: `the editor (${editor}) exited with ${r.status ?? r.signal}; nothing was changed (your copy: ${file})` }))
    const after = readFileSync(file, "utf8")
    if (after === before || after.replace(/^#.*$/gm, "").trim() === "") {
      rmSync(dir, { recursive: true, force: true })
      t.out("Edit cancelled, no changes made.\n")
      return
    }
    const edited = yield* Effect.try({ try: () => obj(parse(after)), catch: (e) => new CliError({ message: `the edited file is not valid YAML (kept at ${file}): ${e instanceof Error ? e.message : String(e)}` }) })
    yield* s.conn.client.update(edited).pipe(Effect.mapError((e) => new CliError({ message: `${e.message} (your copy: ${file})` })))
    rmSync(dir, { recursive: true, force: true })
    t.out(`${Resources.typeName(info)}/${name} edited\n`)
  })

/** Register the cluster-level verbs. */
export const register = (program: Command, env: Env): void => {
  examples(
    program
      .command("api-resources")
      .description("List the resource types the server serves")
      .option("--namespaced <bool>", "only namespaced (true) or cluster-scoped (false) resources")
      .option("--api-group <group>", "only this API group ('' for core)")
      .option("-o, --output <format>", "wide or name")
      .action((opts: { namespaced?: string; output?: string; apiGroup?: string }, command: Command) => env.act(command, (s, t) => apiResources(s, t, opts))),
    `
  kfleet api-resources
  kfleet api-resources --namespaced=false -o wide`
  )
  examples(
    program
      .command("explain")
      .description("Document a resource or one of its fields, from the server's OpenAPI schema")
      .argument("<resource>", "TYPE or TYPE.FIELD.FIELD")
      .option("--recursive", "print every nested field")
      .option("--api-version <v>", "explain this version of the resource")
      .action((what: string, opts: { recursive?: boolean; apiVersion?: string }, command: Command) => env.act(command, (s, t) => explain(s, t, what, opts))),
    `
  kfleet explain deployment
  kfleet explain deployment.spec.strategy
  kfleet explain pod.spec.containers.readinessProbe --recursive`
  )
  const auth = program.command("auth").description("Inspect authorization")
  examples(
    auth
      .command("can-i")
      .description("Ask whether you may do something (exit 0 for yes, 1 for no)")
      .argument("<verb>")
      .argument("[resource]", "TYPE, TYPE/NAME or a non-resource path like /metrics")
      .argument("[name]")
      .option("-A, --all-namespaces", "in any namespace")
      .option("--subresource <sub>", "a subresource, e.g. log or exec")
      .option("-q, --quiet", "no output, only the exit code")
      .action((verb: string, resource: string | undefined, name: string | undefined, opts: { allNamespaces?: boolean; subresource?: string; quiet?: boolean }, command: Command) =>
        env.act(command, (s, t) => canI(s, t, verb, resource, name, opts))
      ),
    `
  kfleet auth can-i create deployments
  kfleet auth can-i get pods --subresource=log -n shop
  kfleet auth can-i exec pods/web-0`
  )
  examples(
    program
      .command("wait")
      .description("Wait until resources meet a condition, are deleted, or a field has a value")
      .argument("<resources...>")
      .requiredOption("--for <condition>", "condition=NAME[=STATUS], delete, or jsonpath='{PATH}'=VALUE")
      .option("--timeout <duration>", "give up after this long", "30s")
      .option("-l, --selector <selector>", "every object matching the selector")
      .action((args: Array<string>, opts: { for?: string; timeout?: string; selector?: string }, command: Command) => env.act(command, (s, t) => wait(s, t, args, opts))),
    `
  kfleet wait --for=condition=Available deployment/hello --timeout=60s
  kfleet wait --for=delete pod/web-0
  kfleet wait --for=jsonpath='{.status.phase}'=Running pod/web-0`
  )
  examples(
    program
      .command("version")
      .description("Print the client and server versions")
      .option("--client", "only the client version")
      .option("-o, --output <format>", "json or yaml")
      .action((opts: { client?: boolean; output?: string }, command: Command) =>
        opts.client ? env.local((t) => Effect.sync(() => t.out(`Client Version: v${version}\n`))) : env.act(command, (s, t) => showVersion(s, t, opts))
      ),
    "  kfleet version"
  )
  examples(
    program
      .command("placement")
      .description("Explain where the scheduler put a pod, or why it could not (Fleet's pods/placement subresource)")
      .argument("<pod>")
      .option("-o, --output <format>", "json or yaml")
      .action((pod: string, opts: { output?: string }, command: Command) => env.act(command, (s, t) => placement(s, t, pod, opts))),
    "  kfleet placement hello-6d9f7-abcde"
  )
  examples(
    program
      .command("edit")
      .description("Edit an object in $KUBE_EDITOR or $EDITOR, then update it (a conflicting change fails, nothing is lost)")
      .argument("<resource...>", "TYPE NAME or TYPE/NAME")
      .option("-o, --output <format>", "edit as yaml (default) or json")
      .action((args: Array<string>, opts: { output?: string }, command: Command) => env.act(command, (s, t) => edit(s, t, args, opts))),
    `
  kfleet edit deployment/hello
  EDITOR=nano kfleet edit svc hello`
  )
}
