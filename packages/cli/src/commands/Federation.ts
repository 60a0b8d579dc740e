/**
 * `kfleet federation …`, against a hub (`koder-fleet hub`):
 *
 *   members            the MemberClusters: READY, MODE, REGION, NODES, CPU, MEMORY, AGE
 *   token              a new join token, printed as the command a member runs to join
 *   approve NAME       approve member NAME's pending certificate request (the hub's half of the
 *                      double opt-in); `deny NAME` refuses it
 *   unjoin NAME        remove member NAME: its entry, namespace and Works; its certificate stops
 *                      working at once
 */
import { Certificates, Federation } from "@koder/fleet-core"
import type { Command } from "commander"
import { createHash, X509Certificate } from "node:crypto"
import { Effect } from "effect"
import * as Age from "../Age.js"
import { CliError } from "../CliError.js"
import { arr, examples, meta, obj, str, type Env } from "../Cli.js"
import * as Printers from "../Printers.js"
import type { Session, Terminal } from "../Run.js"

const MemberRef = { apiVersion: Federation.ApiVersion, kind: "MemberCluster" }
const CsrRef = { apiVersion: "certificates.k8s.io/v1", kind: "CertificateSigningRequest" }

const condition = (o: Record<string, unknown>, type: string) => str(arr(obj(o["status"])["conditions"]).map(obj).find((c) => c["type"] === type)?.["status"] ?? "Unknown")

const members = (s: Session, t: Terminal) =>
  Effect.gen(function* () {
    const list = yield* s.conn.client.listAll(MemberRef)
    const now = Date.now()
    const rows = list.items.map((mc) => {
      const st = obj(mc["status"])
      const r = obj(st["resources"])
      const res = (k: string) => (obj(r["allocatable"])[k] === undefined ? "" : `${str(obj(r["allocated"])[k] ?? "0")}/${str(obj(r["allocatable"])[k])}`)
      const taints = arr(obj(mc["spec"])["taints"]).map((x) => str(obj(x)["key"]).replace(`${Federation.Group}/`, ""))
      return [
        str(meta(mc)["name"]),
        condition(mc, "Ready") + (taints.length > 0 ? ` (${taints.join(",")})` : ""),
        str(obj(mc["spec"])["syncMode"]),
        str(obj(mc["spec"])["region"]) || "<none>",
        str(st["nodeCount"] ?? 0),
        res("cpu"),
        res("memory"),
        Age.since(str(meta(mc)["creationTimestamp"]), now)
      ]
    })
    t.out(rows.length === 0 ? "No members.\n" : Printers.align([["NAME", "READY", "MODE", "REGION", "NODES", "CPU", "MEMORY", "AGE"], ...rows]))
  })

const pendingOf = (s: Session, member: string) =>
  Effect.gen(function* () {
    const list = yield* s.conn.client.listAll(CsrRef)
    return list.items.filter(
      (c) =>
        str(obj(c["spec"])["signerName"]) === Certificates.MemberSigner &&
        str(meta(c)["name"]).startsWith(`member-${member}-`) &&
        Certificates.decisionOf(c as never) === undefined
    )
  })

const decide = (s: Session, t: Terminal, member: string, approve: boolean) =>
  Effect.gen(function* () {
    const pending = yield* pendingOf(s, member)
    if (pending.length === 0) return yield* Effect.fail(new CliError({ message: `member ${member} has no pending certificate request (its server asks when started with --join-hub)`, exitCode: 1 }))
    const now = new Date().toISOString().replace(/\.\d+Z$/, "Z")
    for (const csr of pending) {
      const conditions = [
        ...arr(obj(csr["status"])["conditions"]),
        approve
          ? { type: "Approved", status: "True", reason: "KfleetApprove", message: "approved with kfleet federation approve", lastUpdateTime: now }
          : { type: "Denied", status: "True", reason: "KfleetDeny", message: "denied with kfleet federation deny", lastUpdateTime: now }
      ]
      yield* s.conn.client.update({ ...csr, status: { ...obj(csr["status"]), conditions } }, "approval")
      t.out(`member ${member} ${approve ? "approved" : "denied"} (certificatesigningrequest/${str(meta(csr)["name"])})\n`)
    }
  })

const unjoin = (s: Session, t: Terminal, member: string) =>
  Effect.gen(function* () {
    yield* s.conn.client.delete(MemberRef, undefined, member)
    yield* s.conn.client.delete({ apiVersion: "v1", kind: "Namespace" }, undefined, Federation.memberNamespace(member)).pipe(Effect.catchAll(() => Effect.void))
    t.out(`member ${member} removed (its certificate is no longer accepted)\n`)
  })

const caHash = (pem: string) => `sha256:${createHash("sha256").update(new X509Certificate(pem).publicKey.export({ type: "spki", format: "der" })).digest("hex")}`

const token = (s: Session, t: Terminal) =>
  Effect.gen(function* () {
    const made = yield* s.conn.client.create({ apiVersion: "fleet.koder.dev/v1", kind: "JoinToken", metadata: {} })
    const value = str(obj(made["status"])["token"])
    const ca = s.conn.target.caPem
    t.out(`koder-fleet server --join-hub ${s.conn.target.server} --hub-token ${value}${ca === undefined ? "" : ` --hub-ca-hash ${caHash(ca)}`}\n`)
  })

/** Register `federation` and its verbs. */
export const register = (program: Command, env: Env): void => {
  const f = program.command("federation").description("Members of a hub (koder-fleet hub): list, join tokens, approve, unjoin")
  examples(
    f.command("members").description("List the hub's member clusters").action((_: unknown, command: Command) => env.act(command, (s, t) => members(s, t))),
    "  kfleet --kubeconfig ~/.koder-fleet-hub/kubeconfig federation members"
  )
  examples(f.command("token").description("Make a join token and print the command a member runs to join").action((_: unknown, command: Command) => env.act(command, (s, t) => token(s, t))), "  kfleet federation token")
  examples(
    f
      .command("approve")
      .description("Approve a member's pending certificate request: it joins")
      .argument("<member>")
      .action((member: string, _: unknown, command: Command) => env.act(command, (s, t) => decide(s, t, member, true))),
    "  kfleet federation approve east"
  )
  examples(
    f
      .command("deny")
      .description("Refuse a member's pending certificate request")
      .argument("<member>")
      .action((member: string, _: unknown, command: Command) => env.act(command, (s, t) => decide(s, t, member, false))),
    "  kfleet federation deny east"
  )
  examples(
    f
      .command("unjoin")
      .description("Remove a member: its entry, namespace and Works; its certificate stops working")
      .argument("<member>")
      .action((member: string, _: unknown, command: Command) => env.act(command, (s, t) => unjoin(s, t, member))),
    "  kfleet federation unjoin east"
  )
}
