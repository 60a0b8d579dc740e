/**
 * Verbs on nodes and usage: `cordon`, `uncordon`, `drain` (core's `Drain`: the eviction API, so
 * PodDisruptionBudgets hold; each refusal is printed with its reason, `--timeout` ends it) and
 * `top nodes|pods` (the `metrics.k8s.io` API the agents feed).
 */
import { Drain } from "@koder/fleet-core"
import type { Command } from "commander"
import { Effect } from "effect"
import * as Age from "../Age.js"
import { CliError, usage } from "../CliError.js"
import { arr, examples, meta, obj, str, type Env } from "../Cli.js"
import * as Printers from "../Printers.js"
import type { Session, Terminal } from "../Run.js"
import * as Usage from "../Usage.js"

const cordon = (s: Session, t: Terminal, nodes: ReadonlyArray<string>, on: boolean) =>
  Effect.forEach(nodes, (n) =>
    Effect.gen(function* () {
      const before = yield* s.conn.client.get({ apiVersion: "v1", kind: "Node" }, undefined, n)
      const already = obj(before["spec"])["unschedulable"] === true
      if (already !== on) yield* Drain.cordon(s.conn.client, n, on)
      t.out(`node/${n} ${already === on ? "already " : ""}${on ? "cordoned" : "uncordoned"}\n`)
    })
  )

/** Whether a label selector (matchLabels and matchExpressions) selects `labels` (pure). */
export const selects = (selector: Record<string, unknown>, labels: Record<string, unknown>): boolean => {
  const matchLabels = Object.entries(obj(selector["matchLabels"])).every(([k, v]) => labels[k] === v)
  const expressions = arr(selector["matchExpressions"]).every((raw) => {
    const x = obj(raw)
    const value = labels[str(x["key"])]
    const values = arr(x["values"]).map(str)
    switch (str(x["operator"])) {
      case "In":
        return value !== undefined && values.includes(str(value))
      case "NotIn":
        return value === undefined || !values.includes(str(value))
      case "Exists":
        return value !== undefined
      case "DoesNotExist":
        return value === undefined
      default:
        return false
    }
  })
  return matchLabels && expressions
}

/** Why pods could not be evicted: the budgets that cover them, with their numbers. */
const guards = (s: Session, remaining: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const lines: Array<string> = []
    for (const key of remaining) {
      const [namespace, name] = key.split("/") as [string, string]
      const pod = yield* Effect.either(s.conn.client.get({ apiVersion: "v1", kind: "Pod" }, namespace, name))
      if (pod._tag === "Left") continue
      const labels = obj(meta(pod.right)["labels"])
      const pdbs = yield* s.conn.client.listAll({ apiVersion: "policy/v1", kind: "PodDisruptionBudget" }, { namespace })
      for (const pdb of pdbs.items.filter((b) => selects(obj(obj(b["spec"])["selector"]), labels))) {
        const spec = obj(pdb["spec"])
        const st = obj(pdb["status"])
        const rule = spec["minAvailable"] !== undefined ? `minAvailable ${str(spec["minAvailable"])}` : `maxUnavailable ${str(spec["maxUnavailable"])}`
        lines.push(
          `pod ${key} is protected by PodDisruptionBudget "${str(meta(pdb)["name"])}" (${rule}, ${str(st["currentHealthy"] ?? 0)} healthy, ${str(st["disruptionsAllowed"] ?? 0)} disruptions allowed)`
        )
      }
    }
    return lines
  })

const drain = (s: Session, t: Terminal, node: string, o: { timeout?: string; gracePeriod?: string }) =>
  Effect.gen(function* () {
    const timeout = o.timeout === undefined || o.timeout === "0" ? undefined : Age.parseDuration(o.timeout)
    if (o.timeout !== undefined && o.timeout !== "0" && timeout === undefined) return yield* Effect.fail(usage(`invalid --timeout ${o.timeout}`, "drain"))
    t.out(`node/${node} cordoned\n`)
    const result = yield* Drain.drain(s.conn.client, node, {
      ...(timeout === undefined ? {} : { timeoutMs: timeout * 1000 }),
      ...(o.gracePeriod === undefined ? {} : { gracePeriodSeconds: Number(o.gracePeriod) }),
      retryDelayMs: 1_000,
      pollMs: 250,
      onProgress: (line) => (line.startsWith("error") ? t.err(`${line}\n`) : t.out(`${line}\n`))
    }).pipe(
      Effect.catchTag("DrainTimeout", (e) =>
        Effect.gen(function* () {
          for (const line of yield* guards(s, e.remaining)) t.err(`${line}\n`)
          return yield* Effect.fail(new CliError({ message: `drain did not complete within ${o.timeout}: ${e.remaining.length} pod(s) remain (${e.remaining.join(", ")}); the node stays cordoned` }))
        })
      )
    )
    for (const sk of result.skipped) t.err(`Warning: ignoring ${sk.reason === "DaemonSet" ? "DaemonSet-managed" : "mirror"} pod ${sk.namespace}/${sk.name}\n`)
    t.out(`node/${node} drained\n`)
  })

const top = (s: Session, t: Terminal, what: "nodes" | "pods", name: string | undefined, o: { allNamespaces?: boolean; selector?: string; containers?: boolean }) =>
  Effect.gen(function* () {
    const q = o.selector ? `?labelSelector=${encodeURIComponent(o.selector)}` : ""
    const base = "/apis/metrics.k8s.io/v1beta1"
    if (what === "nodes") {
      const metrics = name === undefined ? Printers.itemsOf(yield* s.conn.json("GET", `${base}/nodes${q}`)) : [yield* s.conn.json("GET", `${base}/nodes/${name}`)]
      const nodes = (yield* s.conn.client.listAll({ apiVersion: "v1", kind: "Node" })).items
      const allocatable = new Map(nodes.map((n) => [str(meta(n)["name"]), obj(obj(n["status"])["allocatable"])]))
      if (metrics.length === 0) return yield* Effect.fail(new CliError({ message: "metrics not available yet" }))
      t.out(`${Printers.align([["NAME", "CPU(cores)", "CPU(%)", "MEMORY(bytes)", "MEMORY(%)"], ...metrics.map((m) => Usage.nodeRow(m, allocatable.get(str(meta(m)["name"])) ?? {}))])}\n`)
      return
    }
    const ns = o.allNamespaces ? "" : `/namespaces/${encodeURIComponent(s.namespace)}`
    const metrics = name === undefined ? Printers.itemsOf(yield* s.conn.json("GET", `${base}${ns}/pods${q}`)) : [yield* s.conn.json("GET", `${base}${ns}/pods/${name}`)]
    if (metrics.length === 0) return yield* Effect.fail(new CliError({ message: `metrics not available yet` }))
    const rows = o.containers
      ? metrics.flatMap((m) => arr(m["containers"]).map((c) => [...(o.allNamespaces ? [str(meta(m)["namespace"])] : []), str(meta(m)["name"]), ...Usage.containerCells(obj(c))]))
      : metrics.map((m) => [...(o.allNamespaces ? [str(meta(m)["namespace"])] : []), ...Usage.podRow(m)])
    const header = [...(o.allNamespaces ? ["NAMESPACE"] : []), "NAME", ...(o.containers ? ["CONTAINER"] : []), "CPU(cores)", "MEMORY(bytes)"]
    t.out(`${Printers.align([header, ...rows])}\n`)
  })

/** Register `cordon`, `uncordon`, `drain`, `top`. */
export const register = (program: Command, env: Env): void => {
  examples(
    program
      .command("cordon")
      .description("Mark nodes unschedulable")
      .argument("<nodes...>")
      .action((nodes: Array<string>, _: unknown, command: Command) => env.act(command, (s, t) => cordon(s, t, nodes, true))),
    "  kfleet cordon node-1"
  )
  examples(
    program
      .command("uncordon")
      .description("Mark nodes schedulable again")
      .argument("<nodes...>")
      .action((nodes: Array<string>, _: unknown, command: Command) => env.act(command, (s, t) => cordon(s, t, nodes, false))),
    "  kfleet uncordon node-1"
  )
  examples(
    program
      .command("drain")
      .description("Cordon a node and evict its pods through the eviction API (PodDisruptionBudgets are honoured)")
      .argument("<node>")
      .option("--timeout <duration>", "give up after this long (e.g. 60s); 0 waits forever", "0")
      .option("--grace-period <seconds>", "grace period for the evicted pods (default: each pod's own)")
      .option("--ignore-daemonsets", "accepted for kubectl compatibility: DaemonSet pods are always left alone")
      .option("--delete-emptydir-data", "accepted for kubectl compatibility: emptyDir pods are evicted")
      .option("--force", "accepted for kubectl compatibility: pods without a controller are evicted")
      .action((node: string, opts: { timeout?: string; gracePeriod?: string }, command: Command) => env.act(command, (s, t) => drain(s, t, node, opts))),
    `
  kfleet drain node-1 --timeout=2m
  kfleet uncordon node-1            # afterwards, to take pods again`
  )
  const topCmd = program.command("top").description("Show CPU and memory usage of nodes or pods (metrics.k8s.io)")
  examples(
    topCmd
      .command("nodes")
      .alias("node")
      .alias("no")
      .description("Usage of nodes")
      .argument("[name]")
      .option("-l, --selector <selector>", "label selector")
      .action((name: string | undefined, opts: { selector?: string }, command: Command) => env.act(command, (s, t) => top(s, t, "nodes", name, opts))),
    "  kfleet top nodes"
  )
  examples(
    topCmd
      .command("pods")
      .alias("pod")
      .alias("po")
      .description("Usage of pods")
      .argument("[name]")
      .option("-A, --all-namespaces", "across all namespaces")
      .option("-l, --selector <selector>", "label selector")
      .option("--containers", "one row per container")
      .action((name: string | undefined, opts: { allNamespaces?: boolean; selector?: string; containers?: boolean }, command: Command) => env.act(command, (s, t) => top(s, t, "pods", name, opts))),
    `
  kfleet top pods
  kfleet top pods -A --containers`
  )
}
