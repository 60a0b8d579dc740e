/**
 * `kfleet federation …`, against a hub (`koder-fleet hub`):
 *
 *   members            the MemberClusters: READY, MODE, REGION, NODES, CPU, MEMORY, AGE
 *   token              a new join token, printed as the command a member runs to join
 *   approve NAME       approve member NAME's pending certificate request (the hub's half of the
 *                      double opt-in); `deny NAME` refuses it
 *   unjoin NAME        remove member NAME: its entry, namespace and Works; its certificate stops
 *                      working at once
 *   join NAME          push mode with --member-kubeconfig: the member's kubeconfig (one context,
 *                      flattened) into a Secret and a Push MemberCluster, so the hub dials it;
 *                      without: a join token and the command the member runs (pull mode)
 */
import { Certificates, Federation, Metadata } from "@koder/fleet-core"
import type { Command } from "commander"
import { createHash, X509Certificate } from "node:crypto"
import { Effect } from "effect"
import { stringify } from "yaml"
import * as Age from "../Age.js"
import * as Kubeconfig from "../Kubeconfig.js"
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
    const now = Metadata.rfc3339(Date.now())
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

/** `join`'s flags. */
export interface JoinOptions {
  readonly memberKubeconfig?: string
  readonly memberContext?: string
  readonly region?: string
  readonly zone?: string
  readonly apiEndpoint?: string
}

/** One context of a kubeconfig, self-contained (files inlined), as the hub keeps it (pure). */
export const flatten = (target: Kubeconfig.Target): string => {
  const b64 = (pem: string) => Buffer.from(pem, "utf8").toString("base64")
  const user = target.token !== undefined ? { token: target.token } : target.certPem !== undefined && target.keyPem !== undefined ? { "client-certificate-data": b64(target.certPem), "client-key-data": b64(target.keyPem) } : undefined
  if (user === undefined) throw new CliError({ message: `the member's kubeconfig (context ${JSON.stringify(target.context)}) has neither a token nor a client certificate and key: the hub could not authenticate`, exitCode: 1 })
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    "current-context": "member",
    clusters: [{ name: "member", cluster: { server: target.server, ...(target.caPem === undefined ? {} : { "certificate-authority-data": b64(target.caPem) }) } }],
    users: [{ name: "member", user }],
    contexts: [{ name: "member", context: { cluster: "member", user: "member" } }]
  })
}

/** The namespace the hub keeps Push members' kubeconfig Secrets in. */
export const SecretsNamespace = "fleet-federation"

const join = (s: Session, t: Terminal, member: string, o: JoinOptions) =>
  Effect.gen(function* () {
    const placement = { ...(o.region === undefined ? {} : { region: o.region }), ...(o.zone === undefined ? {} : { zone: o.zone }) }
    if (o.memberKubeconfig === undefined) {
      const made = yield* s.conn.client.create({ apiVersion: "fleet.koder.dev/v1", kind: "JoinToken", metadata: {} })
      const ca = s.conn.target.caPem
      const flags = [`--join-hub ${s.conn.target.server}`, `--hub-token ${str(obj(made["status"])["token"])}`, ...(ca === undefined ? [] : [`--hub-ca-hash ${caHash(ca)}`]), `--member-name ${member}`, ...(o.region === undefined ? [] : [`--region ${o.region}`])]
      t.out(`on the member (pull mode: it dials the hub):\n  koder-fleet server ${flags.join(" ")}\nthen, here: kfleet federation approve ${member}\n`)
      return
    }
    const target = yield* Effect.try({
      try: () => Kubeconfig.resolve(Kubeconfig.load(o.memberKubeconfig), { ...(o.memberContext === undefined ? {} : { context: o.memberContext }) }),
      catch: (e) => (e instanceof CliError ? e : new CliError({ message: `--member-kubeconfig ${o.memberKubeconfig}: ${e instanceof Error ? e.message : String(e)}`, exitCode: 1 }))
    })
    const kubeconfig = yield* Effect.try({ try: () => flatten(target), catch: (e) => (e instanceof CliError ? e : new CliError({ message: String(e), exitCode: 1 })) })
    const endpoint = (o.apiEndpoint ?? target.server).replace(/\/+$/, "")
    yield* s.conn.client.create({ apiVersion: "v1", kind: "Namespace", metadata: { name: SecretsNamespace } }).pipe(Effect.catchIf((e) => e.status.code === 409, () => Effect.void))
    const secret = { apiVersion: "v1", kind: "Secret", metadata: { name: `${member}-kubeconfig`, namespace: SecretsNamespace, labels: { [Federation.MemberLabel]: member } }, type: "Opaque", stringData: { kubeconfig } }
    // A second join of the same member replaces its kubeconfig (the hub redials with the new one).
    yield* s.conn.client.create(secret).pipe(
      Effect.catchIf(
        (e) => e.status.code === 409,
        () => s.conn.client.patch({ apiVersion: "v1", kind: "Secret" }, SecretsNamespace, `${member}-kubeconfig`, "merge", { stringData: { kubeconfig } })
      )
    )
    yield* s.conn.client
      .create({ apiVersion: Federation.ApiVersion, kind: "MemberCluster", metadata: { name: member }, spec: { syncMode: "Push", apiEndpoint: endpoint, secretRef: { namespace: SecretsNamespace, name: `${member}-kubeconfig` }, ...placement } })
      .pipe(
        Effect.catchIf(
          (e) => e.status.code === 409,
          () => s.conn.client.patch(MemberRef, undefined, member, "merge", { spec: { syncMode: "Push", apiEndpoint: endpoint, secretRef: { namespace: SecretsNamespace, name: `${member}-kubeconfig` }, ...placement } })
        )
      )
    t.out(`member ${member} registered (push mode: the hub dials ${endpoint}); kfleet federation members shows it Ready once the hub reaches it\n`)
  })

/** Register `federation` and its verbs. */
export const register = (program: Command, env: Env): void => {
  const f = program.command("federation").description("Members of a hub (koder-fleet hub): list, join, join tokens, approve, unjoin")
  examples(
    f.command("members").description("List the hub's member clusters").action((_: unknown, command: Command) => env.act(command, (s, t) => members(s, t))),
    "  kfleet --kubeconfig ~/.koder-fleet-hub/kubeconfig federation members"
  )
  examples(
    f
      .command("join")
      .description("Join a member: push mode with --member-kubeconfig (the hub dials it), else print the pull-mode command the member runs")
      .argument("<member>")
      .option("--member-kubeconfig <file>", "the member's kubeconfig: push mode (stored on the hub as a Secret, one context, flattened)")
      .option("--member-context <name>", "the context of --member-kubeconfig (default: its current one)")
      .option("--region <region>", "the member's region")
      .option("--zone <zone>", "the member's zone")
      .option("--api-endpoint <url>", "where the hub dials the member (default: the kubeconfig's server)")
      .action((member: string, o: JoinOptions, command: Command) => env.act(command, (s, t) => join(s, t, member, o))),
    `  kfleet federation join south --member-kubeconfig south.kubeconfig --region ap   # push
  kfleet federation join east --region eu                                          # pull: prints the member's command`
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
