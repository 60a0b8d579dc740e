/**
 * The `certificates.k8s.io/v1` `CertificateSigningRequest` kind, as Kubernetes has it: a PEM
 * PKCS#10 request (`spec.request`, base64) for a signer (`spec.signerName`), who asked
 * (`spec.username`, `groups`, `uid`: set by the API server from the requester, never by the
 * body), the approval (`status.conditions` Approved or Denied, written through the `approval`
 * subresource: `kubectl certificate approve`) and the issued certificate (`status.certificate`,
 * by the signer through `status`). The hub signs `federation.fleet.koder.dev/member` requests
 * (a member's client certificate); other signers are left alone.
 */
import { Schema } from "effect"
import * as FieldError from "./FieldError.js"
import { optional } from "./internal/fields.js"
import { ConditionStatus, ObjectMeta } from "./Meta.js"
import { Time } from "./Scalars.js"

/** What the certificate is for (`client auth`, `digital signature`, …). */
export const KeyUsage = Schema.String

/** The request. */
export const CertificateSigningRequestSpec = Schema.Struct({
  request: Schema.String,
  signerName: Schema.String,
  expirationSeconds: optional(Schema.Number),
  usages: optional(Schema.Array(KeyUsage)),
  username: optional(Schema.String),
  uid: optional(Schema.String),
  groups: optional(Schema.Array(Schema.String)),
  extra: optional(Schema.Record({ key: Schema.String, value: Schema.Array(Schema.String) }))
})

/** An approval, denial or failure. */
export const CertificateSigningRequestCondition = Schema.Struct({
  type: Schema.String,
  status: ConditionStatus,
  reason: optional(Schema.String),
  message: optional(Schema.String),
  lastUpdateTime: optional(Time),
  lastTransitionTime: optional(Time)
})

/** The `CertificateSigningRequest` kind (cluster-scoped, short name `csr`). */
export const CertificateSigningRequest = Schema.Struct({
  apiVersion: Schema.Literal("certificates.k8s.io/v1"),
  kind: Schema.Literal("CertificateSigningRequest"),
  metadata: ObjectMeta,
  spec: CertificateSigningRequestSpec,
  status: optional(
    Schema.Struct({
      conditions: optional(Schema.Array(CertificateSigningRequestCondition)),
      certificate: optional(Schema.String)
    })
  )
})

/** A CertificateSigningRequest object. */
export type CertificateSigningRequest = typeof CertificateSigningRequest.Type

/** The signer of members' client certificates (the hub's CA). */
export const MemberSigner = "federation.fleet.koder.dev/member"

const knownUsages = [
  "signing", "digital signature", "content commitment", "key encipherment", "key agreement", "data encipherment", "cert sign", "crl sign",
  "encipher only", "decipher only", "any", "server auth", "client auth", "code signing", "email protection", "s/mime", "ipsec end system",
  "ipsec tunnel", "ipsec user", "timestamping", "ocsp signing", "microsoft sgc", "netscape sgc"
]

const decodesToPemRequest = (base64: string): boolean => {
  if (!/^[A-Za-z0-9+/]+=*$/.test(base64)) return false
  const text = atob(base64)
  return /-----BEGIN (NEW )?CERTIFICATE REQUEST-----/.test(text)
}

/** Errors of a request (kube-apiserver's `ValidateCertificateSigningRequestCreate`, what Fleet checks). */
export const validate = (csr: CertificateSigningRequest): ReadonlyArray<FieldError.FieldError> => {
  const errors: Array<FieldError.FieldError> = []
  if (csr.spec.request === "") errors.push(FieldError.required("spec.request"))
  else if (!decodesToPemRequest(csr.spec.request)) errors.push(FieldError.invalid("spec.request", "<bytes>", "PEM block type must be CERTIFICATE REQUEST"))
  if (csr.spec.signerName === "") errors.push(FieldError.required("spec.signerName"))
  else if (!/^[a-z0-9.-]+\/[a-zA-Z0-9.-]+$/.test(csr.spec.signerName)) errors.push(FieldError.invalid("spec.signerName", csr.spec.signerName, "must be a fully qualified domain and path of the form 'example.com/signer-name'"))
  if (csr.spec.expirationSeconds !== undefined && csr.spec.expirationSeconds < 600) errors.push(FieldError.invalid("spec.expirationSeconds", csr.spec.expirationSeconds, "may not specify a duration less than 600 seconds (10 minutes)"))
  for (const [i, u] of (csr.spec.usages ?? []).entries()) if (!knownUsages.includes(u)) errors.push(FieldError.notSupported(`spec.usages[${i}]`, u, knownUsages))
  return errors
}

/** What an update may not change: the request and who made it. */
export const validateUpdate = (csr: CertificateSigningRequest, old: CertificateSigningRequest): ReadonlyArray<FieldError.FieldError> =>
  JSON.stringify(csr.spec) === JSON.stringify(old.spec) ? [] : [FieldError.forbidden("spec", "field is immutable")]

/** Whether a request was approved, denied, or neither yet (pure). */
export const decisionOf = (csr: { readonly status?: { readonly conditions?: ReadonlyArray<{ readonly type: string; readonly status: string }> | null } | null }): "Approved" | "Denied" | "Failed" | undefined => {
  const conditions = csr.status?.conditions ?? []
  for (const t of ["Denied", "Failed", "Approved"] as const) if (conditions.some((c) => c.type === t && c.status === "True")) return t
  return undefined
}
