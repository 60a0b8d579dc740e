/**
 * Member certificates, both sides (X.509 with @peculiar/x509, as Tls.ts):
 *
 * - member: `request(name)` makes an ECDSA P-256 key and a PKCS#10 request for
 *   `CN=system:member:<name>, O=system:members`, to be signed by the hub.
 * - hub: `signer(dataDir)` is core's `MemberSigner.Signer` over the hub's CA (`DIR/tls/ca.*`):
 *   it checks a request's self-signature and subject, and issues a client-auth-only certificate
 *   for the request's key, with a fresh serial (the hub accepts a member's current serial only).
 */
import "reflect-metadata"
import * as x509 from "@peculiar/x509"
import { Effect } from "effect"
import { createPrivateKey, randomBytes } from "node:crypto"
import { readFile } from "node:fs/promises"
import type { MemberSigner } from "@koder/fleet-core"
import * as Tls from "../Tls.js"

const algorithm = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const
// A member's clock may lag the hub's a little.
const backdate = 5 * 60 * 1000

const serial = () => {
  const bytes = randomBytes(16)
  bytes[0] = (bytes[0] ?? 0) & 0x7f
  return bytes.toString("hex")
}

/** A member's new key (PKCS#8 PEM) and its certificate request (PEM). */
export const request = async (member: string): Promise<{ readonly key: string; readonly csr: string }> => {
  const keys = await crypto.subtle.generateKey(algorithm, true, ["sign", "verify"])
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({ name: `CN=system:member:${member}, O=system:members`, keys, signingAlgorithm: algorithm })
  const key = x509.PemConverter.encode(await crypto.subtle.exportKey("pkcs8", keys.privateKey), "PRIVATE KEY")
  return { key, csr: csr.toString("pem") }
}

const subjectOf = (name: x509.Name) => {
  const json = name.toJSON()
  const values = (type: string) => json.flatMap((rdn) => rdn[type] ?? [])
  return { commonName: values("CN")[0] ?? "", organizations: values("O") }
}

/** The hub's signer of member requests (its CA must be Fleet's own, generated in DIR/tls). */
export const signer = (dataDir: string): MemberSigner.Signer => ({
  inspect: (pem) =>
    Effect.tryPromise({
      try: async () => {
        const csr = new x509.Pkcs10CertificateRequest(pem)
        if (!(await csr.verify())) throw new Error("the request's signature does not verify")
        return subjectOf(new x509.Name(csr.subject))
      },
      catch: (e) => (e instanceof Error ? e.message : String(e))
    }),
  sign: (pem, subject, lifetimeMs) =>
    Effect.tryPromise({
      try: async () => {
        const f = Tls.files(dataDir)
        const [caPem, caKeyPem] = await Promise.all([readFile(f.caCert, "utf8"), readFile(f.caKey, "utf8")])
        const ca = new x509.X509Certificate(caPem)
        const csr = new x509.Pkcs10CertificateRequest(pem)
        const signingKey = await crypto.subtle.importKey("pkcs8", createPrivateKey(caKeyPem).export({ type: "pkcs8", format: "der" }), { name: "ECDSA", namedCurve: "P-256" }, false, ["sign"])
        const now = Date.now()
        const notAfter = new Date(now + lifetimeMs)
        const number = serial()
        const cert = await x509.X509CertificateGenerator.create({
          serialNumber: number,
          subject: `CN=${subject.commonName}, O=${subject.organizations.join("+O=")}`,
          issuer: ca.subject,
          notBefore: new Date(now - backdate),
          notAfter,
          signingAlgorithm: algorithm,
          publicKey: await csr.publicKey.export(),
          signingKey,
          extensions: [
            new x509.BasicConstraintsExtension(false, undefined, true),
            new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
            new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.clientAuth]),
            await x509.AuthorityKeyIdentifierExtension.create(ca.publicKey)
          ]
        })
        return { pem: cert.toString("pem"), serial: number.replace(/^0+/, "") || "0", notAfter: notAfter.toISOString().replace(/\.\d+Z$/, "Z") }
      },
      catch: (e) => (e instanceof Error ? e.message : String(e))
    })
})
