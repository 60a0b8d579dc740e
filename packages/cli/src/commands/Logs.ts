/**
 * `kfleet logs` and `kfleet exec`: a pod's container output (streamed with `-f`, `--tail`,
 * `--previous`, `--since`, `--timestamps`) and one command run in a container (Fleet's exec is a
 * request and an answer: the output and the exit code, which becomes kfleet's). Both accept a
 * workload (`deployment/NAME`, `rs/NAME`, `job/NAME`...): the first of its pods, as kubectl.
 */
import { Client } from "@koder/fleet-core"
import type { Command } from "commander"
import { Effect } from "effect"
import * as Age from "../Age.js"
import { CliError, usage } from "../CliError.js"
import { examples, meta, obj, refOf, str, type Env } from "../Cli.js"
import { failureOf } from "../Connection.js"
import * as Resources from "../Resources.js"
import type { Session, Terminal } from "../Run.js"

type Json = Record<string, unknown>

const PodRef = { apiVersion: "v1", plural: "pods", namespaced: true }

/** The label selector of a workload's pods (pure). */
export const selectorOf = (o: Json): string | undefined => {
  const spec = obj(o["spec"])
  const sel = obj(spec["selector"])
  const labels = Object.keys(sel).length === 0 ? {} : obj(sel["matchLabels"] ?? (sel["matchExpressions"] === undefined ? sel : {}))
  const text = Object.entries(labels).map(([k, v]) => `${k}=${str(v)}`).join(",")
  return text === "" ? undefined : text
}

/** The pod a `pod`, `pod/NAME` or `TYPE/NAME` argument means. */
const podFor = (s: Session, t: Terminal, arg: string) =>
  Effect.gen(function* () {
    if (!arg.includes("/") || arg.startsWith("pod/") || arg.startsWith("pods/") || arg.startsWith("po/")) return arg.slice(arg.indexOf("/") + 1)
    const [type, name] = [arg.slice(0, arg.indexOf("/")), arg.slice(arg.indexOf("/") + 1)]
    const info = Resources.resolveOne(yield* s.resources(), type)
    const workload = yield* s.conn.client.get(refOf(info), s.namespace, name)
    const selector = selectorOf(workload)
    if (selector === undefined) return yield* Effect.fail(new CliError({ message: `cannot find the pods of ${arg}: it has no selector` }))
    const pods = (yield* s.conn.client.listAll(PodRef, { namespace: s.namespace, labelSelector: selector })).items.filter((p) => meta(p)["deletionTimestamp"] === undefined)
    if (pods.length === 0) return yield* Effect.fail(new CliError({ message: `no pods found for ${arg}` }))
    // Running pods first, then the oldest (kubectl's ByLogging order, simplified).
    const running = (p: Json) => (str(obj(p["status"])["phase"]) === "Running" ? 0 : 1)
    pods.sort((a, b) => running(a) - running(b) || str(meta(a)["creationTimestamp"]).localeCompare(str(meta(b)["creationTimestamp"])))
    const chosen = String(meta(pods[0])["name"])
    if (pods.length > 1) t.err(`Found ${pods.length} pods, using pod/${chosen}\n`)
    return chosen
  })

interface LogOptions {
  readonly follow?: boolean
  readonly container?: string
  readonly tail?: string
  readonly previous?: boolean
  readonly since?: string
  readonly timestamps?: boolean
}

/** The `pods/log` query of the flags (pure). */
export const logQuery = (o: LogOptions): string => {
  const q = new URLSearchParams()
  if (o.container) q.set("container", o.container)
  if (o.follow) q.set("follow", "true")
  if (o.previous) q.set("previous", "true")
  if (o.timestamps) q.set("timestamps", "true")
  if (o.tail !== undefined && Number(o.tail) >= 0) q.set("tailLines", String(Number(o.tail)))
  if (o.since !== undefined) {
    const seconds = Age.parseDuration(o.since)
    if (seconds === undefined) throw usage(`invalid argument "${o.since}" for "--since" flag: time: invalid duration`, "logs")
    q.set("sinceSeconds", String(Math.max(1, Math.ceil(seconds))))
  }
  const s = q.toString()
  return s === "" ? "" : `?${s}`
}

const logs = (s: Session, t: Terminal, arg: string, o: LogOptions) =>
  Effect.gen(function* () {
    const query = logQuery(o)
    const pod = yield* podFor(s, t, arg)
    const response = yield* s.conn.send("GET", `${Client.path(PodRef, s.namespace, pod, "log")}${query}`, { accept: "text/plain, */*" })
    if (!response.ok) return yield* failureOf(response)
    const body = response.body
    if (body === null) return
    yield* Effect.tryPromise({
      try: async (signal) => {
        const reader = body.getReader()
        signal.addEventListener("abort", () => void reader.cancel().catch(() => undefined), { once: true })
        const decoder = new TextDecoder()
        for (;;) {
          const { done, value } = await reader.read()
          if (done) break
          t.out(decoder.decode(value, { stream: true }))
        }
      },
      catch: (e) => new CliError({ message: `the log stream broke: ${e instanceof Error ? e.message : String(e)}` })
    })
  })

const exec = (s: Session, t: Terminal, arg: string, command: ReadonlyArray<string>, o: { container?: string; stdin?: boolean; timeout?: string }) =>
  Effect.gen(function* () {
    if (command.length === 0) return yield* Effect.fail(usage("you must specify at least one command for the container", "exec"))
    const pod = yield* podFor(s, t, arg)
    const stdin = o.stdin ? t.stdin() : undefined
    const result = yield* s.conn.client.createSubresource({ apiVersion: "v1", kind: "Pod" }, s.namespace, pod, "exec", {
      ...(o.container ? { container: o.container } : {}),
      command,
      ...(stdin === undefined ? {} : { stdin }),
      ...(o.timeout === undefined ? {} : { timeoutSeconds: Number(o.timeout) })
    })
    t.out(str(result["stdout"]))
    t.err(str(result["stderr"]))
    const code = Number(result["exitCode"] ?? 0)
    if (code !== 0) return yield* Effect.fail(new CliError({ message: "", exitCode: code }))
  })

/** Register `logs` and `exec`. */
export const register = (program: Command, env: Env): void => {
  examples(
    program
      .command("logs")
      .description("Print (or stream) the logs of a container in a pod")
      .argument("<pod>", "POD, pod/NAME, or a workload such as deployment/NAME")
      .option("-f, --follow", "stream new output")
      .option("-c, --container <name>", "the container (needed when the pod has several)")
      .option("--tail <lines>", "only the last N lines (-1: all)")
      .option("-p, --previous", "the previous, terminated instance of the container")
      .option("--since <duration>", "only output newer than this (5s, 2m, 3h)")
      .option("--timestamps", "prefix each line with its timestamp")
      .action((pod: string, opts: LogOptions, command: Command) => env.act(command, (s, t) => logs(s, t, pod, opts))),
    `
  kfleet logs hello-6d9f7-abcde
  kfleet logs -f deployment/hello
  kfleet logs web-0 -c sidecar --tail=20
  kfleet logs web-0 --previous
  kfleet logs web-0 --since=10m`
  )
  examples(
    program
      .command("exec")
      .description("Run a command in a container and print its output (needs a ProcessControl consent in the namespace)")
      .argument("<pod>", "POD, pod/NAME, or deployment/NAME")
      .argument("[command...]", "the command, after --")
      .option("-c, --container <name>", "the container")
      .option("-i, --stdin", "send standard input to the command")
      .option("--timeout <seconds>", "give up after this many seconds")
      .action((pod: string, cmd: Array<string>, opts: { container?: string; stdin?: boolean; timeout?: string }, command: Command) => env.act(command, (s, t) => exec(s, t, pod, cmd, opts))),
    `
  kfleet exec hello-6d9f7-abcde -- ls /
  kfleet exec deployment/hello -c hello -- sh -c 'echo $PORT'
  echo hi | kfleet exec -i web-0 -- cat`
  )
}
