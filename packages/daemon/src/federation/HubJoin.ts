/**
 * A member server's side of joining a hub (`koder-fleet server --join-hub URL --hub-token TOKEN
 * --hub-ca-hash sha256:…`), pull mode, double opt-in:
 *
 *   hub CA ◀── the TLS handshake, kept only if its public key hashes to --hub-ca-hash (then saved)
 *   key + request (CN=system:member:<name>, O=system:members) + the hash of a token of its own
 *       ─▶ POST CertificateSigningRequest with the hub token ─▶ wait (polling the request) for an
 *       administrator's approval and the hub's certificate ─▶ DIR/hub/{member.key, member.token,
 *       member.crt, hub-ca.crt}
 *   then, with that certificate (mutual TLS) and its token as the bearer: MemberAgent (heartbeat,
 *       status, Works) and the tunnel
 *
 * A later start reuses the saved certificate; one within a third of its lifetime of expiring is
 * renewed by a request made with the current certificate (the hub approves a member's own
 * renewal itself), and new connections use the new one. Waiting for approval never stops the member: its cluster runs meanwhile.
 */
import { Authn, Client, MemberAgent, type MemberConnections, MemberSigner } from "@koder/fleet-core"
import { Duration, Effect, Schedule, type Scope } from "effect"
import { X509Certificate, randomBytes } from "node:crypto"
import { mkdir } from "node:fs/promises"
import { join } from "node:path"
import * as AgentProcess from "../agent/AgentProcess.js"
import { discoverCa, publicKeyHash } from "../agent/AgentRole.js"
import { readIfExists, writeAtomic } from "../internal/files.js"
import * as MemberCertificates from "./MemberCertificates.js"
import * as MemberTunnelLink from "./MemberTunnelLink.js"

/** The Fleet version a member reports. */
export const fleetVersion = "0.1.0"

/** What `--join-hub` and its companions say. */
export interface Settings {
  readonly hub: string
  readonly token: string | undefined
  readonly caHash: string | undefined
  readonly member: string
  readonly heartbeatMs?: number
}

const files = (dataDir: string) => {
  const dir = join(dataDir, "hub")
  return { dir, key: join(dir, "member.key"), cert: join(dir, "member.crt"), ca: join(dir, "hub-ca.crt"), token: join(dir, "member.token") }
}

const log = (message: string) => console.log(`koder-fleet server: hub: ${message}`)

/** Until the hub answers: a member started before its hub (or cut off from it) keeps trying, and says why. */
const untilAnswered = <A, E>(what: string, effect: Effect.Effect<A, E>) =>
  effect.pipe(
    Effect.tapError((e) => Effect.sync(() => log(`${what}: ${e instanceof Error ? e.message : typeof e === "object" && e !== null && "message" in e ? String(e.message) : String(e)}; trying again`))),
    Effect.retry(Schedule.exponential(Duration.seconds(1)).pipe(Schedule.union(Schedule.spaced(Duration.seconds(30))))),
    Effect.orDie
  )

/** The hub's CA: saved, or found in the hub's handshake by its hash. */
const hubCa = (settings: Settings, dataDir: string) =>
  Effect.tryPromise(async () => {
    const f = files(dataDir)
    const saved = await readIfExists(f.ca)
    if (saved !== undefined && (settings.caHash === undefined || publicKeyHash(saved) === settings.caHash)) return saved
    if (settings.caHash === undefined) throw new Error("no hub CA: give --hub-ca-hash (printed by koder-fleet hub)")
    const pem = await discoverCa(settings.hub, settings.caHash)
    await mkdir(f.dir, { recursive: true, mode: 0o700 })
    await writeAtomic(f.ca, pem, 0o644)
    return pem
  }).pipe(Effect.mapError((e) => e.error))

/** Ask for a certificate with `client` and wait for it (approval may take a person). */
const obtain = (client: Client.Client, settings: Settings, region: string, tokenHash: string | undefined) =>
  Effect.gen(function* () {
    const made = yield* Effect.promise(() => MemberCertificates.request(settings.member))
    const name = MemberSigner.requestName(settings.member, randomBytes(4).toString("hex"))
    yield* untilAnswered("cannot send the certificate request", client.create({
      apiVersion: "certificates.k8s.io/v1",
      kind: "CertificateSigningRequest",
      metadata: { name, annotations: { [MemberSigner.RegionAnnotation]: region, ...(tokenHash === undefined ? {} : { [MemberSigner.TokenHashAnnotation]: tokenHash }) } },
      spec: { request: btoa(made.csr), signerName: "federation.fleet.koder.dev/member", usages: ["digital signature", "client auth"] }
    }).pipe(Effect.mapError((e) => e.status)))
    log(`certificate request ${name} sent; waiting for approval (on the hub: kfleet federation approve ${settings.member}, or kubectl certificate approve ${name})`)
    const cert = yield* client.get({ apiVersion: "certificates.k8s.io/v1", kind: "CertificateSigningRequest" }, undefined, name).pipe(
      Effect.flatMap((csr) => {
        const status = (csr["status"] ?? {}) as { certificate?: string; conditions?: ReadonlyArray<{ type: string; status: string; message?: string }> }
        const refused = (status.conditions ?? []).find((c) => (c.type === "Denied" || c.type === "Failed") && c.status === "True")
        if (refused !== undefined) return Effect.die(new Error(`the hub refused ${name} (${refused.type}): ${refused.message ?? ""}`))
        return status.certificate === undefined || status.certificate === "" ? Effect.fail("pending" as const) : Effect.succeed(atob(status.certificate))
      }),
      Effect.retry(Schedule.spaced(Duration.millis(500)))
    )
    return { cert, key: made.key }
  })

const remainingFraction = (pem: string, now: number): number => {
  const c = new X509Certificate(pem)
  const from = Date.parse(c.validFrom)
  const to = Date.parse(c.validTo)
  return (to - now) / Math.max(1, to - from)
}

/** Join (or rejoin with the saved certificate) and run the member agent for as long as the scope lives. */
export const run = (settings: Settings, options: {
    readonly dataDir: string
    readonly region: string
    readonly local: Client.Client
    /** The member's API answering the hub's tunnelled requests (MemberTunnelLink.localAnswer). */
    readonly answer: (request: MemberConnections.ProxyRequest) => Promise<MemberConnections.ProxyResponse>
    readonly version: string
  }): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    const f = files(options.dataDir)
    const ca = yield* untilAnswered(`cannot get the hub's CA from ${settings.hub}`, hubCa(settings, options.dataDir))
    const saved = yield* Effect.promise(async () => ({ cert: await readIfExists(f.cert), key: await readIfExists(f.key), token: await readIfExists(f.token) }))
    // The member's own token, made at its join (a member joined before tokens existed has none).
    let memberToken = saved.token?.trim()
    let identity: { cert: string; key: string } | undefined = saved.cert !== undefined && saved.key !== undefined ? { cert: saved.cert, key: saved.key } : undefined
    if (identity !== undefined && remainingFraction(identity.cert, Date.now()) <= 0) identity = undefined
    if (identity === undefined) {
      if (settings.token === undefined) return yield* Effect.die(new Error("not joined yet: give --hub-token (printed by koder-fleet hub)"))
      const bootstrap = Client.make({ server: settings.hub, token: settings.token, fetch: AgentProcess.fetchTrusting(ca) })
      const fresh = randomBytes(32).toString("base64url")
      identity = yield* obtain(bootstrap, settings, options.region, yield* Authn.hashToken(fresh)).pipe(Effect.orDie)
      memberToken = fresh
      yield* Effect.promise(async () => {
        await mkdir(f.dir, { recursive: true, mode: 0o700 })
        await writeAtomic(f.key, identity!.key, 0o600)
        await writeAtomic(f.token, fresh, 0o600)
        await writeAtomic(f.cert, identity!.cert, 0o644)
      })
      log(`joined as member ${settings.member}`)
    }
    // The certificate in use can change under a running client (renewal).
    let current = AgentProcess.fetchTrusting(ca, identity)
    const hub = Client.make({ server: settings.hub, ...(memberToken === undefined ? {} : { token: memberToken }), fetch: ((input: string, init?: RequestInit) => current(input, init)) as typeof globalThis.fetch })
    const tokenHash = memberToken === undefined ? undefined : yield* Authn.hashToken(memberToken)
    // Renewal: a third of the lifetime left ─▶ a new request, made with the current certificate.
    yield* Effect.forkScoped(
      Effect.repeat(
        Effect.suspend(() => {
          if (remainingFraction(identity!.cert, Date.now()) > 1 / 3) return Effect.void
          return obtain(hub, settings, options.region, tokenHash).pipe(
            Effect.flatMap((next) =>
              Effect.promise(async () => {
                await writeAtomic(f.key, next.key, 0o600)
                await writeAtomic(f.cert, next.cert, 0o644)
                identity = next
                current = AgentProcess.fetchTrusting(ca, next)
                log("certificate renewed")
              })
            ),
            Effect.catchAll(() => Effect.void)
          )
        }),
        Schedule.spaced(Duration.hours(1))
      )
    )
    // The tunnel for the hub's proxy and aggregated reads, dialled out like everything else.
    yield* MemberTunnelLink.run({
      hub: settings.hub,
      member: settings.member,
      ca,
      identity: () => identity!,
      ...(memberToken === undefined ? {} : { token: memberToken }),
      answer: options.answer,
      onState: (state, why) => log(state === "open" ? "tunnel open" : `tunnel closed (${why ?? ""}); dialling again`)
    })
    yield* MemberAgent.run({
      member: settings.member,
      region: options.region,
      hub,
      local: options.local,
      fleetVersion: options.version,
      ...(settings.heartbeatMs === undefined ? {} : { heartbeatMs: settings.heartbeatMs }),
      onError: (m) => console.error(`koder-fleet server: hub: ${m}`)
    })
  })
