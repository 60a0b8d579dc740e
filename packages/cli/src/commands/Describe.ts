/**
 * `kfleet describe TYPE [NAME...]`: each object in kubectl's describe layout (`Describe.ts`)
 * followed by its Events, found by field selector on `involvedObject`.
 */
import type { Command } from "commander"
import { Effect } from "effect"
import { usage } from "../CliError.js"
import { examples, meta, refOf, type Env } from "../Cli.js"
import * as Describe from "../Describe.js"
import * as Resources from "../Resources.js"
import type { Session, Terminal } from "../Run.js"

type Json = Record<string, unknown>

const EventRef = { apiVersion: "v1", plural: "events", namespaced: true }

/** The Events about one object (by uid, as kubectl). */
const eventsFor = (s: Session, o: Json) =>
  Effect.map(
    s.conn.client.listAll(EventRef, {
      ...(meta(o)["namespace"] !== undefined ? { namespace: String(meta(o)["namespace"]) } : {}),
      fieldSelector: `involvedObject.name=${String(meta(o)["name"])},involvedObject.uid=${String(meta(o)["uid"] ?? "")}`
    }),
    (l) => l.items
  )

const run = (s: Session, t: Terminal, args: ReadonlyArray<string>, o: { selector?: string; allNamespaces?: boolean }) =>
  Effect.gen(function* () {
    const resources = yield* s.resources()
    const pairs = Resources.parseArgs(args)
    if (pairs.length === 0) return yield* Effect.fail(usage("You must specify the type of resource to describe.", "describe"))
    const out: Array<string> = []
    for (const { type, names } of pairs) {
      const info = Resources.resolveOne(resources, type)
      const namespace = info.namespaced ? (o.allNamespaces ? undefined : s.namespace) : undefined
      const objects =
        names.length > 0
          ? yield* Effect.forEach(names, (n) => s.conn.client.get(refOf(info), namespace, n))
          : (yield* s.conn.client.listAll(refOf(info), { ...(namespace === undefined ? {} : { namespace }), ...(o.selector ? { labelSelector: o.selector } : {}) })).items
      for (const x of objects) {
        const full = { apiVersion: info.apiVersion, kind: info.kind, ...x }
        out.push(Describe.describe(full, yield* eventsFor(s, full), Date.now()))
      }
    }
    if (out.length === 0) t.err(`No resources found in ${s.namespace} namespace.\n`)
    else t.out(out.join("\n\n"))
  })

/** Register `describe`. */
export const register = (program: Command, env: Env): void => {
  examples(
    program
      .command("describe")
      .description("Show details of resources, with their Events")
      .argument("[resources...]", "TYPE [NAME...] or TYPE/NAME ...")
      .option("-l, --selector <selector>", "describe every object matching the label selector")
      .option("-A, --all-namespaces", "across all namespaces")
      .action((args: Array<string>, opts: { selector?: string; allNamespaces?: boolean }, command: Command) => env.act(command, (s, t) => run(s, t, args, opts))),
    `
  kfleet describe pod hello-6d9f7-abcde
  kfleet describe deployment/hello
  kfleet describe nodes
  kfleet describe pods -l app=hello`
  )
}
