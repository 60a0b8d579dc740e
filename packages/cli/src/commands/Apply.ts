/**
 * Verbs that take manifests or create objects: `apply` (three-way merge, `--dry-run`,
 * `--prune -l`), `create` (`-f`, and the generators `namespace`, `deployment`, `configmap`,
 * `token`), `delete` (names, `-f`, `-l`, `--all`, `--cascade`, waiting until the objects are
 * gone) and `diff` (what `apply` would change, computed by the server with a dry-run patch).
 */
import { Client } from "@koder/fleet-core"
import type { Command } from "commander"
import { createTwoFilesPatch } from "diff"
import { Effect } from "effect"
import * as Age from "../Age.js"
import * as Apply from "../Apply.js"
import { CliError, usage } from "../CliError.js"
import { collect, examples, meta, refOf, type Env } from "../Cli.js"
import * as Manifests from "../Manifests.js"
import * as Printers from "../Printers.js"
import * as Resources from "../Resources.js"
import type { Session, Terminal } from "../Run.js"
import * as ThreeWayMerge from "../ThreeWayMerge.js"

type Json = Record<string, unknown>

interface FileOptions {
  readonly filename?: ReadonlyArray<string>
  readonly recursive?: boolean
}

const readManifests = (t: Terminal, o: FileOptions) => Effect.try({ try: () => Manifests.read(o.filename ?? [], o.recursive === true, t.stdin), catch: (e) => e })

/** Run `apply`. */
export const apply = (s: Session, t: Terminal, o: FileOptions & { readonly dryRun?: string | boolean; readonly prune?: boolean; readonly selector?: string; readonly output?: string }) =>
  Effect.gen(function* () {
    const dryRun = Apply.parseDryRun(o.dryRun)
    if (o.prune && !o.selector) return yield* Effect.fail(usage("all resources selected for prune without explicitly passing --all. To prune all resources, pass the --all flag. If you did not mean to prune all resources, specify a label selector", "apply"))
    const manifests = yield* readManifests(t, o)
    const resources = yield* s.resources()
    const placed = yield* Effect.try({ try: () => manifests.map((m) => Apply.place(resources, m, s.namespace, s.explicitNamespace)), catch: (e) => e })
    const failures: Array<string> = []
    const outcomes: Array<Apply.Outcome> = []
    for (const p of placed) {
      const r = yield* Effect.either(Apply.applyOne(s.conn, p, dryRun))
      if (r._tag === "Left") {
        failures.push(r.left.message)
        t.err(`${t.red("error:")} ${r.left.message}\n`)
        continue
      }
      outcomes.push(r.right)
      if (o.output === undefined) t.out(`${Apply.line(r.right, dryRun)}\n`)
    }
    if (o.output !== undefined) {
      const format = Printers.parseFormat(o.output)
      if (format._tag === "Table") t.out(outcomes.map((x) => `${Apply.line(x, dryRun)}\n`).join(""))
      else t.out(Printers.objects(format, outcomes.map((x) => x.result), (x) => Resources.typeName({ kind: String(x["kind"]), group: String(x["apiVersion"]).split("/").length > 1 ? String(x["apiVersion"]).split("/")[0]! : "" }), outcomes.length === 1))
    }
    if (o.prune && o.selector) {
      const applied = new Set(placed.map((p) => `${p.namespace ?? ""}/${p.name}`))
      const types = [...new Map(placed.map((p) => [`${p.info.apiVersion}/${p.info.plural}`, p])).values()]
      for (const p of types) {
        const live = yield* s.conn.client.listAll(refOf(p.info), { ...(p.info.namespaced ? { namespace: p.namespace ?? s.namespace } : {}), labelSelector: o.selector })
        for (const victim of Apply.pruneCandidates(live.items, applied)) {
          const name = String(meta(victim)["name"])
          if (dryRun === "none") yield* s.conn.client.delete(refOf(p.info), p.info.namespaced ? String(meta(victim)["namespace"]) : undefined, name, { propagationPolicy: "Background" })
          else if (dryRun === "server") yield* s.conn.json("DELETE", `${Client.path(refOf(p.info), p.info.namespaced ? String(meta(victim)["namespace"]) : undefined, name)}?dryRun=All`)
          t.out(`${Resources.typeName(p.info)}/${name} pruned${Apply.dryRunSuffix(dryRun)}\n`)
        }
      }
    }
    if (failures.length > 0) return yield* Effect.fail(new CliError({ message: failures.length === 1 ? "1 object was not applied" : `${failures.length} objects were not applied` }))
  })

/** Run `create -f`. */
const createFromFiles = (s: Session, t: Terminal, o: FileOptions & { readonly dryRun?: string | boolean }) =>
  Effect.gen(function* () {
    const dryRun = Apply.parseDryRun(o.dryRun)
    const manifests = yield* readManifests(t, o)
    const resources = yield* s.resources()
    let failed = 0
    for (const m of manifests) {
      const p = yield* Effect.try({ try: () => Apply.place(resources, m, s.namespace, s.explicitNamespace), catch: (e) => e })
      if (dryRun !== "client") {
        const r = yield* Effect.either(s.conn.json("POST", `${Client.path(refOf(p.info), p.namespace)}${dryRun === "server" ? "?dryRun=All" : ""}`, { body: p.object }))
        if (r._tag === "Left") {
          failed++
          t.err(`${t.red("error:")} error when creating "${p.source}": ${r.left.message}\n`)
          continue
        }
        t.out(`${Resources.typeName(p.info)}/${String(meta(r.right)["name"])} created${Apply.dryRunSuffix(dryRun)}\n`)
      } else t.out(`${Resources.typeName(p.info)}/${p.name} created${Apply.dryRunSuffix(dryRun)}\n`)
    }
    if (failed > 0) return yield* Effect.fail(new CliError({ message: `${failed} object(s) were not created` }))
  })

/** POST one generated object and print `kind/name created`. */
const createObject = (s: Session, t: Terminal, o: Json, dryRunFlag: string | boolean | undefined, output: string | undefined) =>
  Effect.gen(function* () {
    const dryRun = Apply.parseDryRun(dryRunFlag)
    const resources = yield* s.resources()
    const p = Apply.place(resources, { source: "", object: o }, s.namespace, s.explicitNamespace)
    const created =
      dryRun === "client" ? p.object : yield* s.conn.json("POST", `${Client.path(refOf(p.info), p.namespace)}${dryRun === "server" ? "?dryRun=All" : ""}`, { body: p.object })
    const format = Printers.parseFormat(output)
    if (format._tag === "Table") t.out(`${Resources.typeName(p.info)}/${String(meta(created)["name"])} created${Apply.dryRunSuffix(dryRun)}\n`)
    else t.out(Printers.objects(format, [{ apiVersion: p.info.apiVersion, kind: p.info.kind, ...created }], () => Resources.typeName(p.info), true))
  })

/** The namespace and names `delete` and friends act on. */
interface Targets {
  readonly info: Resources.ResourceInfo
  readonly namespace: string | undefined
  readonly names: ReadonlyArray<string>
}

/** Run `delete`. */
export const del = (
  s: Session,
  t: Terminal,
  args: ReadonlyArray<string>,
  o: FileOptions & { readonly selector?: string; readonly all?: boolean; readonly cascade?: string; readonly gracePeriod?: string; readonly now?: boolean; readonly wait?: boolean; readonly ignoreNotFound?: boolean; readonly timeout?: string }
) =>
  Effect.gen(function* () {
    const resources = yield* s.resources()
    const propagation = o.cascade === undefined || o.cascade === "background" || o.cascade === "true" ? "Background" : o.cascade === "foreground" ? "Foreground" : o.cascade === "orphan" || o.cascade === "false" ? "Orphan" : undefined
    if (propagation === undefined) return yield* Effect.fail(usage(`invalid cascade value (${o.cascade}). Must be "background", "foreground", or "orphan".`, "delete"))
    const grace = o.now ? 1 : o.gracePeriod === undefined ? undefined : Number(o.gracePeriod)
    const targets: Array<Targets> = []
    if ((o.filename ?? []).length > 0) {
      for (const m of yield* readManifests(t, o)) {
        const p = Apply.place(resources, m, s.namespace, s.explicitNamespace)
        targets.push({ info: p.info, namespace: p.namespace, names: [p.name] })
      }
    } else {
      const pairs = Resources.parseArgs(args)
      if (pairs.length === 0) return yield* Effect.fail(usage("You must provide one or more resources by argument or filename.", "delete"))
      for (const { type, names } of pairs) {
        const info = Resources.resolveOne(resources, type)
        const namespace = info.namespaced ? s.namespace : undefined
        if (names.length > 0) targets.push({ info, namespace, names })
        else if (o.selector || o.all) {
          const list = yield* s.conn.client.listAll(refOf(info), { ...(namespace === undefined ? {} : { namespace }), ...(o.selector ? { labelSelector: o.selector } : {}) })
          targets.push({ info, namespace, names: list.items.map((x) => String(meta(x)["name"])) })
        } else return yield* Effect.fail(usage(`resource(s) were provided, but no name was specified`, "delete"))
      }
    }
    const deleted: Array<{ info: Resources.ResourceInfo; namespace: string | undefined; name: string; uid: string }> = []
    let missing = 0
    for (const target of targets) {
      for (const name of target.names) {
        const r = yield* Effect.either(
          s.conn.client.delete(refOf(target.info), target.namespace, name, { propagationPolicy: propagation, ...(grace === undefined ? {} : { gracePeriodSeconds: grace }) })
        )
        if (r._tag === "Left") {
          if (r.left.status.code === 404 && o.ignoreNotFound) continue
          if (r.left.status.code === 404) {
            missing++
            t.err(`${t.red("error:")} ${r.left.message}\n`)
            continue
          }
          return yield* Effect.fail(r.left)
        }
        deleted.push({ info: target.info, namespace: target.namespace, name, uid: String(meta(r.right)["uid"] ?? "") })
        t.out(`${Resources.typeName(target.info)} "${name}" deleted\n`)
      }
    }
    if (targets.every((x) => x.names.length === 0) && !o.ignoreNotFound) t.err(`No resources found\n`)
    if (o.wait !== false) {
      // kubectl waits until each object is gone (finalizers done, pods terminated).
      const deadline = Date.now() + (o.timeout === undefined ? 120_000 : Number.parseFloat(o.timeout) * 1000)
      for (const d of deleted) {
        for (;;) {
          const r = yield* Effect.either(s.conn.client.get(refOf(d.info), d.namespace, d.name))
          if (r._tag === "Left" || String(meta(r.right)["uid"]) !== d.uid) break
          if (Date.now() > deadline) return yield* Effect.fail(new CliError({ message: `timed out waiting for ${Resources.typeName(d.info)}/${d.name} to be deleted` }))
          yield* Effect.sleep("200 millis")
        }
      }
    }
    if (missing > 0) return yield* Effect.fail(new CliError({ message: `${missing} object(s) not found` }))
  })

const clean = (o: Json): Json => {
  const { managedFields: _m, resourceVersion: _r, generation: _g, ...m } = meta(o)
  const annotations = { ...(m["annotations"] as Json | undefined) }
  delete annotations[ThreeWayMerge.lastAppliedAnnotation]
  const { status: _s, ...rest } = o
  return { ...rest, metadata: { ...m, ...(Object.keys(annotations).length > 0 ? { annotations } : { annotations: undefined }) } }
}

/** Run `diff`: exit 1 when something differs, as kubectl's. */
export const diff = (s: Session, t: Terminal, o: FileOptions) =>
  Effect.gen(function* () {
    const manifests = yield* readManifests(t, o)
    const resources = yield* s.resources()
    let differs = false
    for (const m of manifests) {
      const p = Apply.place(resources, m, s.namespace, s.explicitNamespace)
      const live = yield* Effect.either(s.conn.client.get(refOf(p.info), p.namespace, p.name))
      let before: Json | undefined
      let after: Json
      if (live._tag === "Left") {
        if (live.left.status.code !== 404) return yield* Effect.fail(live.left)
        after = yield* s.conn.json("POST", `${Client.path(refOf(p.info), p.namespace)}?dryRun=All`, { body: ThreeWayMerge.withLastApplied(p.object) })
      } else {
        before = live.right
        const patch = ThreeWayMerge.applyPatch(p.object, live.right)
        after =
          Object.keys(patch).length === 0
            ? live.right
            : yield* s.conn.json("PATCH", `${Client.path(refOf(p.info), p.namespace, p.name)}?dryRun=All`, { body: patch, contentType: "application/merge-patch+json" })
      }
      const a = before === undefined ? "" : Printers.yaml(clean(before))
      const b = Printers.yaml(clean(after))
      if (a === b) continue
      differs = true
      const label = `${p.info.apiVersion.replace("/", ".")}.${p.info.kind}.${p.namespace ?? ""}.${p.name}`.replace("..", ".")
      const text = createTwoFilesPatch(`live/${label}`, `merged/${label}`, a, b, undefined, undefined, { context: 3 })
      t.out(
        text
          .split("\n")
          .slice(1)
          .map((l) => (l.startsWith("+") && !l.startsWith("+++") ? t.green(l) : l.startsWith("-") && !l.startsWith("---") ? t.red(l) : l))
          .join("\n")
      )
    }
    // kubectl's exit code 1 for "differs", without an error line.
    if (differs) return yield* Effect.fail(new CliError({ message: "", exitCode: 1 }))
  })

/** Register `apply`, `create`, `delete`, `diff`. */
export const register = (program: Command, env: Env): void => {
  examples(
    program
      .command("apply")
      .description("Create or update resources from files, directories or stdin (three-way merge)")
      .option("-f, --filename <path>", "file, directory or - for stdin (repeatable)", collect)
      .option("-R, --recursive", "process directories recursively")
      .option("--dry-run [mode]", "client (nothing sent) or server (validated, not stored)")
      .option("--prune", "delete objects selected by -l that were applied before and are not in the files")
      .option("-l, --selector <selector>", "label selector for --prune")
      .option("-o, --output <format>", "print the applied objects: yaml, json, name")
      .action((opts: FileOptions & { dryRun?: string | boolean; prune?: boolean; selector?: string; output?: string }, command: Command) => env.act(command, (s, t) => apply(s, t, opts))),
    `
  kfleet apply -f examples/hello                 # every manifest in the directory
  kfleet apply -f deploy.yaml --dry-run=server   # validate without storing
  cat app.yaml | kfleet apply -f -
  kfleet apply -f manifests/ -R --prune -l app=shop`
  )

  const create = program
    .command("create")
    .description("Create resources from files, or generate common ones (namespace, deployment, configmap, token)")
    .option("-f, --filename <path>", "file, directory or - for stdin (repeatable)", collect)
    .option("-R, --recursive", "process directories recursively")
    .option("--dry-run [mode]", "client or server")
    .action((opts: FileOptions & { dryRun?: string | boolean }, command: Command) => {
      if ((opts.filename ?? []).length === 0) {
        command.help({ error: true })
      }
      return env.act(command, (s, t) => createFromFiles(s, t, opts))
    })
  examples(
    create,
    `
  kfleet create -f pod.yaml
  kfleet create namespace shop
  kfleet create deployment web --image=node:20 --replicas=2 -- node server.js
  kfleet create configmap settings --from-literal=mode=fast
  kfleet create token default --duration=1h`
  )
  examples(
    create
      .command("namespace")
      .alias("ns")
      .description("Create a namespace")
      .argument("<name>")
      .option("--dry-run [mode]", "client or server")
      .option("-o, --output <format>", "yaml, json, name")
      .action((name: string, opts: { dryRun?: string | boolean; output?: string }, command: Command) =>
        env.act(command, (s, t) => createObject(s, t, { apiVersion: "v1", kind: "Namespace", metadata: { name } }, opts.dryRun, opts.output))
      ),
    "  kfleet create namespace shop"
  )
  examples(
    create
      .command("deployment")
      .alias("deploy")
      .description("Create a deployment running one container")
      .argument("<name>")
      .argument("[command...]", "the container's command (after --)")
      .requiredOption("--image <image>", "the container image")
      .option("--replicas <n>", "number of replicas", "1")
      .option("--port <port>", "a container port to declare")
      .option("--dry-run [mode]", "client or server")
      .option("-o, --output <format>", "yaml, json, name")
      .action((name: string, cmd: Array<string>, opts: { image: string; replicas: string; port?: string; dryRun?: string | boolean; output?: string }, command: Command) =>
        env.act(command, (s, t) =>
          createObject(
            s,
            t,
            {
              apiVersion: "apps/v1",
              kind: "Deployment",
              metadata: { name, labels: { app: name } },
              spec: {
                replicas: Number(opts.replicas),
                selector: { matchLabels: { app: name } },
                template: {
                  metadata: { labels: { app: name } },
                  spec: {
                    containers: [
                      {
                        name: opts.image.replace(/^.*\//, "").replace(/[:@].*$/, "").replace(/[^a-z0-9-]/g, "-") || "app",
                        image: opts.image,
                        ...(cmd.length > 0 ? { command: cmd } : {}),
                        ...(opts.port === undefined ? {} : { ports: [{ containerPort: Number(opts.port) }] })
                      }
                    ]
                  }
                }
              }
            },
            opts.dryRun,
            opts.output
          )
        )
      ),
    "  kfleet create deployment web --image=node:20 --replicas=2 --port=8080 -- node -e 'require(\"http\").createServer((q,r)=>r.end(\"hi\")).listen(process.env.PORT)'"
  )
  examples(
    create
      .command("configmap")
      .alias("cm")
      .description("Create a configmap from literal values")
      .argument("<name>")
      .option("--from-literal <key=value>", "a key and value (repeatable)", collect)
      .option("--dry-run [mode]", "client or server")
      .option("-o, --output <format>", "yaml, json, name")
      .action((name: string, opts: { fromLiteral?: Array<string>; dryRun?: string | boolean; output?: string }, command: Command) =>
        env.act(command, (s, t) =>
          Effect.suspend((): Effect.Effect<void, unknown> => {
            const data: Record<string, string> = {}
            for (const kv of opts.fromLiteral ?? []) {
              const i = kv.indexOf("=")
              if (i <= 0) return Effect.fail(usage(`invalid literal source ${kv}, expected key=value`, "create configmap"))
              data[kv.slice(0, i)] = kv.slice(i + 1)
            }
            return createObject(s, t, { apiVersion: "v1", kind: "ConfigMap", metadata: { name }, data }, opts.dryRun, opts.output)
          })
        )
      ),
    "  kfleet create configmap settings --from-literal=mode=fast --from-literal=level=3"
  )
  examples(
    create
      .command("token")
      .description("Request a service account token (TokenRequest)")
      .argument("<serviceaccount>")
      .option("--duration <duration>", "requested lifetime in seconds or as 1h, 30m", "")
      .option("--audience <aud>", "an audience of the token (repeatable)", collect)
      .action((sa: string, opts: { duration: string; audience?: Array<string> }, command: Command) =>
        env.act(command, (s, t) =>
          Effect.gen(function* () {
            const seconds = opts.duration === "" ? undefined : /^\d+$/.test(opts.duration) ? Number(opts.duration) : Age.parseDuration(opts.duration)
            if (seconds === undefined && opts.duration !== "") return yield* Effect.fail(usage(`invalid duration ${opts.duration}`, "create token"))
            const r = yield* s.conn.client.createSubresource({ apiVersion: "v1", kind: "ServiceAccount" }, s.namespace, sa, "token", {
              apiVersion: "authentication.k8s.io/v1",
              kind: "TokenRequest",
              spec: { ...(seconds === undefined ? {} : { expirationSeconds: seconds }), ...(opts.audience ? { audiences: opts.audience } : {}) }
            })
            t.out(`${String((r["status"] as Json | undefined)?.["token"] ?? "")}\n`)
          })
        )
      ),
    "  kfleet create token default --duration=1h"
  )

  examples(
    program
      .command("delete")
      .description("Delete resources by name, file, label selector or --all")
      .argument("[resources...]", "TYPE NAME... or TYPE/NAME ...")
      .option("-f, --filename <path>", "delete what the files describe (repeatable)", collect)
      .option("-R, --recursive", "process directories recursively")
      .option("-l, --selector <selector>", "delete every object matching the label selector")
      .option("--all", "delete every object of the type in the namespace")
      .option("--cascade <mode>", "background (default), foreground or orphan")
      .option("--grace-period <seconds>", "seconds to give pods to stop")
      .option("--now", "stop pods at once (grace period 1)")
      .option("--no-wait", "return without waiting until the objects are gone")
      .option("--timeout <seconds>", "how long to wait for the objects to go", "120")
      .option("--ignore-not-found", "a missing object is not an error")
      .action((args: Array<string>, opts: FileOptions & { selector?: string; all?: boolean; cascade?: string; gracePeriod?: string; now?: boolean; wait?: boolean; ignoreNotFound?: boolean; timeout?: string }, command: Command) =>
        env.act(command, (s, t) => del(s, t, args, opts))
      ),
    `
  kfleet delete pod web-7d4b9-abcde
  kfleet delete deployment/hello service/hello
  kfleet delete -f examples/hello
  kfleet delete pods -l app=hello
  kfleet delete deployment hello --cascade=orphan`
  )

  examples(
    program
      .command("diff")
      .description("Show what apply would change (the server computes the result; exit 1 when it differs)")
      .option("-f, --filename <path>", "file, directory or - for stdin (repeatable)", collect)
      .option("-R, --recursive", "process directories recursively")
      .action((opts: FileOptions, command: Command) => env.act(command, (s, t) => diff(s, t, opts))),
    "  kfleet diff -f examples/hello"
  )
}
