/**
 * The hub's signer of member certificates (`federation.fleet.koder.dev/member`), and the second
 * half of a member's double opt-in: the member asked (a CertificateSigningRequest made with the
 * hub's join token), an administrator approved (`kfleet federation approve`, or `kubectl
 * certificate approve`); then this controller
 *
 *   checks the subject (CN `system:member:<name>`, O `system:members`, nothing else) and who asked
 *     (a join-token holder, `system:bootstrappers`; or the member itself renewing) ─▶ else Failed
 *   signs it with the hub's CA (client auth only) ─▶ status.certificate
 *   records the member: MemberCluster `<name>` (Pull; region and zone from the request's
 *     annotations), Joined=True, the certificate's serial (the hub accepts no other), and its
 *     namespace `fleet-member-<name>` for its Works and heartbeat.
 *
 * An administrator may also set a standing rule (the hub's `--auto-approve-members PATTERN`): new
 * members whose names match it, asked with a join token, are approved without them.
 *
 * A member's renewal (asked with its current certificate, before it expires) is approved here
 * without an administrator, as kube-controller-manager's csrapproving does for kubelets: the
 * member already holds that identity. The CA and the X.509 work are the daemon's (`Signer`).
 */
import { Clock, Effect } from "effect"
import type * as ApiError from "../api/ApiError.js"
import * as Certificates from "../model/Certificates.js"
import * as Federation from "../model/Federation.js"
import * as Validation from "../model/Validation.js"
import { asArray, asObject, asString, type JsonObject } from "../object/Json.js"
import { annotationsOf, resourceVersionOf, rfc3339 } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"
import type * as Controller from "../controllers/Controller.js"

/** The request annotations a member sets for its MemberCluster. */
export const RegionAnnotation = `${Federation.Group}/region`
export const ZoneAnnotation = `${Federation.Group}/zone`
/**
 * On a member's request: the hash (`sha256:<hex>`) of a token the member made and keeps; the hub
 * records it and from then on wants that token beside the certificate (a stolen key alone is not
 * the member). Only a hash travels; a renewal without it keeps the recorded one.
 */
export const TokenHashAnnotation = `${Federation.Group}/token-hash`

/** What the daemon's CA does for the controller. */
export interface Signer {
  /** The subject of a PEM request (its self-signature checked). */
  readonly inspect: (requestPem: string) => Effect.Effect<{ readonly commonName: string; readonly organizations: ReadonlyArray<string> }, string>
  /** A client certificate for the request's key. */
  readonly sign: (requestPem: string, subject: { readonly commonName: string; readonly organizations: ReadonlyArray<string> }, lifetimeMs: number) => Effect.Effect<{ readonly pem: string; readonly serial: string; readonly notAfter: string }, string>
}

/** What to do with a request (pure). */
export type Decision =
  | { readonly _tag: "None" }
  | { readonly _tag: "Approve"; readonly reason: string }
  | { readonly _tag: "Fail"; readonly reason: string; readonly message: string }
  | { readonly _tag: "Sign"; readonly member: string }

/** Whether a request was made by the member itself, with its current certificate (a renewal). */
const renewalBy = (c: Certificates.CertificateSigningRequest, commonName: string) => c.spec.username === commonName && (c.spec.groups ?? []).includes(Federation.MembersGroup)

const renewal = (csr: Record<string, unknown>, member: string) => renewalBy(csr as unknown as Certificates.CertificateSigningRequest, `system:member:${member}`)

/** Decide from the request and its inspected subject (undefined: not readable). */
export const decide = (
  csr: JsonObject,
  subject: { readonly commonName: string; readonly organizations: ReadonlyArray<string> } | string,
  memberExists: (name: string) => boolean,
  autoApprove: (member: string) => boolean = () => false
): Decision => {
  const c = csr as unknown as Certificates.CertificateSigningRequest
  if (c.spec?.signerName !== Certificates.MemberSigner) return { _tag: "None" }
  if ((c.status?.certificate ?? "") !== "") return { _tag: "None" }
  const decision = Certificates.decisionOf(c)
  if (decision === "Denied" || decision === "Failed") return { _tag: "None" }
  if (typeof subject === "string") return { _tag: "Fail", reason: "BadRequest", message: `the request cannot be read: ${subject}` }
  const cn = subject.commonName
  const member = cn.startsWith("system:member:") ? cn.slice("system:member:".length) : ""
  if (member === "" || Validation.isDNS1123Label(member).length > 0 || member.length > 50) {
    return { _tag: "Fail", reason: "SubjectNotAllowed", message: `the common name must be system:member:<name> with a DNS label name, not ${JSON.stringify(cn)}` }
  }
  if (subject.organizations.length !== 1 || subject.organizations[0] !== Federation.MembersGroup) {
    return { _tag: "Fail", reason: "SubjectNotAllowed", message: `the organization must be exactly ${Federation.MembersGroup}` }
  }
  const renewal = renewalBy(c, cn)
  const groups = c.spec.groups ?? []
  const joining = groups.includes("system:bootstrappers") || groups.includes("system:masters")
  if (!renewal && !joining) return { _tag: "Fail", reason: "RequesterNotAllowed", message: `only a join-token holder or the member itself may ask for ${cn}` }
  if (decision === undefined) {
    if (renewal && memberExists(member)) return { _tag: "Approve", reason: "AutoApproved" }
    // The administrator's standing rule (`--auto-approve-members`) stands in for their approval of a new member.
    return joining && autoApprove(member) ? { _tag: "Approve", reason: "AutoApproveRule" } : { _tag: "None" }
  }
  return { _tag: "Sign", member }
}

/** The member's namespace. */
const namespaceObject = (member: string): JsonObject => ({
  apiVersion: "v1",
  kind: "Namespace",
  metadata: { name: Federation.memberNamespace(member), labels: { [Federation.MemberLabel]: member } }
})


const ignoreConflict = <A>(e: Effect.Effect<A, ApiError.ApiError>) =>
  e.pipe(
    Effect.asVoid,
    Effect.catchIf(
      (x) => x.status.code === 409,
      () => Effect.void
    )
  )

/** Options. */
export interface Options {
  readonly signer: Signer
  /** A member certificate's lifetime (default 30 days; members renew at two thirds). */
  readonly lifetimeMs?: number
  /** New members approved without an administrator (their rule, e.g. a name pattern). */
  readonly autoApprove?: (member: string) => boolean
}

/** The controller: one key per request. */
export const reconciler = (options: Options): Controller.Reconciler => ({
  name: "member-signer",
  primary: ResourceRefs.CertificateSigningRequest,
  reads: [ResourceRefs.MemberCluster],
  reconcile: (name, ctx) =>
    Effect.gen(function* () {
      const csr = ctx.informers.for(ResourceRefs.CertificateSigningRequest).get(undefined, name)
      if (csr === undefined || asString(asObject(csr["spec"])["signerName"]) !== Certificates.MemberSigner) return
      const pem = atob(asString(asObject(csr["spec"])["request"]))
      const subject = yield* Effect.either(options.signer.inspect(pem))
      const members = ctx.informers.for(ResourceRefs.MemberCluster)
      const d = decide(csr, subject._tag === "Right" ? subject.right : subject.left, (m) => members.get(undefined, m) !== undefined, options.autoApprove)
      const now = rfc3339(yield* Clock.currentTimeMillis)
      const conditions = asArray(asObject(csr["status"])["conditions"]).map(asObject)
      switch (d._tag) {
        case "None":
          return
        case "Approve":
          yield* ctx.client.update(
            {
              ...csr,
              status: {
                ...asObject(csr["status"]),
                conditions: [
                  ...conditions,
                  { type: "Approved", status: "True", reason: d.reason, message: d.reason === "AutoApproveRule" ? "approved by the hub's --auto-approve-members rule" : "a member renewing its own certificate", lastUpdateTime: now, lastTransitionTime: now }
                ]
              }
            },
            "approval"
          )
          return
        case "Fail":
          yield* ctx.client.update({ ...csr, status: { ...asObject(csr["status"]), conditions: [...conditions, { type: "Failed", status: "True", reason: d.reason, message: d.message, lastUpdateTime: now, lastTransitionTime: now }] } }, "status")
          return
        case "Sign": {
          if (subject._tag === "Left") return
          const issued = yield* options.signer.sign(pem, subject.right, options.lifetimeMs ?? 30 * 24 * 3600_000).pipe(Effect.either)
          if (issued._tag === "Left") {
            yield* ctx.client.update({ ...csr, status: { ...asObject(csr["status"]), conditions: [...conditions, { type: "Failed", status: "True", reason: "SigningFailed", message: issued.left, lastUpdateTime: now, lastTransitionTime: now }] } }, "status")
            return
          }
          const member = d.member
          // Namespace and entry first: a member holding its certificate finds both.
          yield* ignoreConflict(ctx.client.create(namespaceObject(member)))
          const existing = members.get(undefined, member)
          const a = annotationsOf(csr)
          const offered = a[TokenHashAnnotation] ?? ""
          const tokenHash = /^sha256:[0-9a-f]{64}$/.test(offered) ? offered : renewal(csr, member) ? undefined : null
          const certificate = { serial: issued.right.serial, notAfter: issued.right.notAfter, ...(tokenHash === undefined ? {} : { tokenHash }) }
          const joined = { type: "Joined", status: "True", reason: "CertificateIssued", message: `certificate ${issued.right.serial} issued from ${name}`, lastTransitionTime: now }
          if (existing === undefined) {
            const created = yield* ctx.client.create({
              apiVersion: Federation.ApiVersion,
              kind: "MemberCluster",
              metadata: { name: member, labels: { [Federation.MemberLabel]: member } },
              spec: { syncMode: "Pull", ...(a[RegionAnnotation] === undefined ? {} : { region: a[RegionAnnotation] }), ...(a[ZoneAnnotation] === undefined ? {} : { zone: a[ZoneAnnotation] }) }
            })
            yield* ctx.client.patch(ResourceRefs.MemberCluster, undefined, member, "merge", { metadata: { resourceVersion: resourceVersionOf(created) }, status: { conditions: [joined], certificate } }, "status")
          } else {
            const previous = asObject(asObject(existing["status"])["certificate"])
            const others = asArray(asObject(existing["status"])["conditions"]).map(asObject).filter((c) => c["type"] !== "Joined")
            yield* ctx.client.patch(
              ResourceRefs.MemberCluster,
              undefined,
              member,
              "merge",
              // A renewal keeps the certificate it replaces usable for a while (connections open
              // with it); a new join through a token makes every earlier one worthless at once.
              { status: { conditions: [...others, joined], certificate: { ...certificate, ...(renewal(csr, member) && previous["serial"] !== undefined ? { previousSerial: previous["serial"], rotatedAt: now } : { previousSerial: null, rotatedAt: null }) } } },
              "status"
            )
          }
          yield* ctx.client.update({ ...csr, status: { ...asObject(csr["status"]), certificate: btoa(issued.right.pem) } }, "status")
          yield* ctx.events.record(csr, "Normal", "Issued", `certificate for member ${member} issued (serial ${issued.right.serial}, until ${issued.right.notAfter})`)
          return
        }
      }
    })
})

/** The name a member gives its requests (`member-<name>-<suffix>`), so it may read them back. */
export const requestName = (member: string, suffix: string): string => `member-${member}-${suffix}`

