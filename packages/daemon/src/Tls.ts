/**
 * The server's TLS material (DESIGN §5: HTTPS by default). On first start a CA (10 years) and a
 * server certificate signed by it (1 year) are generated into `DIR/tls/`; later starts reuse them,
 * regenerating only the server certificate when its SANs no longer match the wanted set, it
 * expires within 30 days, or it no longer chains to the CA. `--tls-cert/--tls-key` (and an
 * optional `--tls-ca`) replace all of this with the operator's own files.
 *
 *   given files? ─▶ read them
 *   else ─▶ CA ok? ─(no)─▶ new CA + new server cert
 *              └(yes)─▶ server cert ok (SANs, expiry, issuer, key)? ─(no)─▶ new server cert
 *
 * Keys are ECDSA P-256 (fast to generate, accepted by every TLS client that matters), written
 * PKCS#8 PEM with mode 0600.
 */
import "reflect-metadata" // @peculiar/x509's dependency injection (tsyringe) needs the Reflect polyfill
import * as x509 from "@peculiar/x509"
import { Effect } from "effect"
import { X509Certificate, createPrivateKey, createPublicKey, randomBytes, type webcrypto } from "node:crypto"
import { readFile } from "node:fs/promises"
import { isIP } from "node:net"
import { hostname } from "node:os"
import { join } from "node:path"
import { TlsError, describe } from "./DaemonError.js"
import { readIfExists, writeAtomic } from "./internal/files.js"

/** Where to find or put the material. */
export interface Options {
  /** The data dir; generated files go to `<dataDir>/tls/`. */
  readonly dataDir: string
  /** Extra subject alternative names (`--tls-san`), IP addresses or DNS names. */
  readonly extraSans?: ReadonlyArray<string>
  /** The operator's own certificate chain (PEM); with `keyFile`, disables generation. */
  readonly certFile?: string
  readonly keyFile?: string
  /** The CA that signed `certFile`, written into the kubeconfig when given. */
  readonly caFile?: string
  /** The clock (tests). */
  readonly now?: () => Date
}

/** What the HTTPS server and the kubeconfig need. */
export interface Material {
  /** Server certificate (PEM; may hold a chain). */
  readonly cert: string
  /** Server private key (PEM). */
  readonly key: string
  /** The CA clients should trust (PEM), when known. */
  readonly ca: string | undefined
  /** What this start did: generated a CA and a server certificate, only the latter, nothing, or used given files. */
  readonly source: "generated" | "renewed" | "reused" | "given"
}

/** The files of generated material inside the data dir. */
export const files = (dataDir: string) => {
  const dir = join(dataDir, "tls")
  return {
    dir,
    caCert: join(dir, "ca.crt"),
    caKey: join(dir, "ca.key"),
    serverCert: join(dir, "server.crt"),
    serverKey: join(dir, "server.key")
  }
}

const day = 24 * 60 * 60 * 1000
const caLifetime = 3650 * day
const serverLifetime = 365 * day
const renewBefore = 30 * day
// Backdate notBefore a little so a client whose clock lags does not reject a fresh certificate.
const backdate = 60 * 60 * 1000
const algorithm = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const

/** Canonical text of one SAN: IPs in their shortest form, DNS names lower-cased. */
export const canonicalSan = (san: string): string => {
  const s = san.trim()
  if (isIP(s) === 6) return new URL(`http://[${s}]`).hostname.slice(1, -1)
  if (isIP(s) === 4) return s
  return s.toLowerCase()
}

/** The SANs a generated server certificate carries: the local names plus `extra`, deduplicated. */
export const wantedSans = (extra: ReadonlyArray<string> = []): ReadonlyArray<string> => {
  const all = ["localhost", "127.0.0.1", "::1", hostname(), ...extra].map(canonicalSan).filter((s) => s !== "")
  return [...new Set(all)]
}

/** The SANs of a PEM certificate, canonical (as `wantedSans` spells them). */
export const sansOf = (certPem: string): ReadonlyArray<string> => {
  const text = new X509Certificate(certPem).subjectAltName ?? ""
  return text
    .split(/,\s*/)
    .map((part) => {
      const m = /^(DNS|IP Address):(.*)$/.exec(part.trim())
      return m?.[2] === undefined ? undefined : canonicalSan(m[2])
    })
    .filter((s): s is string => s !== undefined)
}

const sameSet = (a: ReadonlyArray<string>, b: ReadonlyArray<string>) => {
  const sa = new Set(a)
  const sb = new Set(b)
  return sa.size === sb.size && [...sa].every((x) => sb.has(x))
}

const serial = () => {
  const bytes = randomBytes(16)
  bytes[0] = (bytes[0] ?? 0) & 0x7f // positive, as RFC 5280 requires
  return bytes.toString("hex")
}

const exportKey = async (key: webcrypto.CryptoKey) => x509.PemConverter.encode(await crypto.subtle.exportKey("pkcs8", key), "PRIVATE KEY")

const importSigningKey = (pem: string) => {
  // Normalise whatever PEM flavour the file holds (SEC1 or PKCS#8) to PKCS#8 DER for WebCrypto.
  const der = createPrivateKey(pem).export({ type: "pkcs8", format: "der" })
  return crypto.subtle.importKey("pkcs8", der, { name: "ECDSA", namedCurve: "P-256" }, false, ["sign"])
}

const generateCa = async (now: Date) => {
  const keys = await crypto.subtle.generateKey(algorithm, true, ["sign", "verify"])
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: `CN=koder-fleet-ca@${Math.floor(now.getTime() / 1000)}`,
    notBefore: new Date(now.getTime() - backdate),
    notAfter: new Date(now.getTime() + caLifetime),
    signingAlgorithm: algorithm,
    keys,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign | x509.KeyUsageFlags.digitalSignature, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey)
    ]
  })
  return { cert: cert.toString("pem"), key: await exportKey(keys.privateKey) }
}

const generateServer = async (ca: { cert: string; key: string }, sans: ReadonlyArray<string>, now: Date) => {
  const keys = await crypto.subtle.generateKey(algorithm, true, ["sign", "verify"])
  const caCert = new x509.X509Certificate(ca.cert)
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: "CN=koder-fleet-server",
    issuer: caCert.subject,
    notBefore: new Date(now.getTime() - backdate),
    notAfter: new Date(now.getTime() + serverLifetime),
    signingAlgorithm: algorithm,
    publicKey: keys.publicKey,
    signingKey: await importSigningKey(ca.key),
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension(sans.map((value) => ({ type: isIP(value) === 0 ? "dns" : "ip", value }))),
      await x509.AuthorityKeyIdentifierExtension.create(caCert.publicKey),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey)
    ]
  })
  return { cert: cert.toString("pem"), key: await exportKey(keys.privateKey) }
}

const validUntil = (certPem: string) => new Date(new X509Certificate(certPem).validTo).getTime()

/** Is the CA usable for another while: parseable, a CA, its key matching, not expiring soon? */
const caUsable = (ca: { cert: string; key: string }, now: Date) => {
  try {
    const cert = new X509Certificate(ca.cert)
    return cert.ca && cert.checkPrivateKey(createPrivateKey(ca.key)) && validUntil(ca.cert) - now.getTime() > renewBefore
  } catch {
    return false
  }
}

/** Does the server certificate still fit: wanted SANs, issued by this CA, its key, not expiring soon? */
export const serverUsable = (server: { cert: string; key: string }, caPem: string, sans: ReadonlyArray<string>, now: Date): boolean => {
  try {
    const cert = new X509Certificate(server.cert)
    const ca = new X509Certificate(caPem)
    return (
      sameSet(sansOf(server.cert), sans) &&
      cert.checkIssued(ca) &&
      cert.verify(createPublicKey(caPem)) &&
      cert.checkPrivateKey(createPrivateKey(server.key)) &&
      validUntil(server.cert) - now.getTime() > renewBefore
    )
  } catch {
    return false
  }
}

const fail = (what: string) => (e: unknown) => new TlsError({ message: `${what}: ${describe(e)}` })

const given = (options: Options & { certFile: string; keyFile: string }): Effect.Effect<Material, TlsError> =>
  Effect.tryPromise({
    try: async () => {
      const cert = await readFile(options.certFile, "utf8")
      const key = await readFile(options.keyFile, "utf8")
      const ca = options.caFile === undefined ? undefined : await readFile(options.caFile, "utf8")
      // Fail at start, not at the first handshake, when the pair does not belong together.
      if (!new X509Certificate(cert).checkPrivateKey(createPrivateKey(key))) throw new Error(`${options.keyFile} is not the key of ${options.certFile}`)
      return { cert, key, ca, source: "given" as const }
    },
    catch: fail("reading --tls-cert/--tls-key/--tls-ca")
  })

/** Load the TLS material, generating or renewing it in the data dir as needed. */
export const ensure = (options: Options): Effect.Effect<Material, TlsError> => {
  const { certFile, keyFile } = options
  if (certFile !== undefined || keyFile !== undefined) {
    if (certFile === undefined || keyFile === undefined) return Effect.fail(new TlsError({ message: "--tls-cert and --tls-key go together" }))
    return given({ ...options, certFile, keyFile })
  }
  return Effect.tryPromise({
    try: async () => {
      const now = options.now?.() ?? new Date()
      const f = files(options.dataDir)
      const sans = wantedSans(options.extraSans)
      const caCert = await readIfExists(f.caCert)
      const caKey = await readIfExists(f.caKey)
      let ca = caCert !== undefined && caKey !== undefined ? { cert: caCert, key: caKey } : undefined
      let source: Material["source"] = "reused"
      if (ca === undefined || !caUsable(ca, now)) {
        ca = await generateCa(now)
        await writeAtomic(f.caKey, ca.key, 0o600)
        await writeAtomic(f.caCert, ca.cert, 0o644)
        source = "generated"
      }
      const serverCert = await readIfExists(f.serverCert)
      const serverKey = await readIfExists(f.serverKey)
      let server = serverCert !== undefined && serverKey !== undefined ? { cert: serverCert, key: serverKey } : undefined
      if (server === undefined || !serverUsable(server, ca.cert, sans, now)) {
        server = await generateServer(ca, sans, now)
        await writeAtomic(f.serverKey, server.key, 0o600)
        await writeAtomic(f.serverCert, server.cert, 0o644)
        if (source === "reused") source = "renewed"
      }
      return { cert: server.cert, key: server.key, ca: ca.cert, source }
    },
    catch: fail(`preparing TLS material in ${files(options.dataDir).dir}`)
  })
}

/** The common name of the client certificate the server presents to node agents. */
export const nodeClientName = "fleet:apiserver-node-client"

/**
 * A client certificate for the server to reach node agents (logs, exec, signal), signed by the
 * cluster CA so agents — which hold the CA since they joined — can check it. Issued in memory at
 * each start; undefined when the CA's key is not in the data dir (the operator brought their own
 * certificates), in which case remote nodes cannot be reached.
 */
export const issueNodeClient = async (dataDir: string, now = new Date()): Promise<{ readonly cert: string; readonly key: string } | undefined> => {
  const f = files(dataDir)
  const caCert = await readIfExists(f.caCert)
  const caKey = await readIfExists(f.caKey)
  if (caCert === undefined || caKey === undefined) return undefined
  const keys = await crypto.subtle.generateKey(algorithm, true, ["sign", "verify"])
  const ca = new x509.X509Certificate(caCert)
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: `CN=${nodeClientName}`,
    issuer: ca.subject,
    notBefore: new Date(now.getTime() - backdate),
    notAfter: new Date(now.getTime() + serverLifetime),
    signingAlgorithm: algorithm,
    publicKey: keys.publicKey,
    signingKey: await importSigningKey(caKey),
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.clientAuth]),
      await x509.AuthorityKeyIdentifierExtension.create(ca.publicKey)
    ]
  })
  return { cert: cert.toString("pem"), key: await exportKey(keys.privateKey) }
}

/** A self-signed serving certificate (a node agent's endpoint, as the kubelet's default). */
export const selfSigned = async (commonName: string, sans: ReadonlyArray<string>, now = new Date()): Promise<{ readonly cert: string; readonly key: string }> => {
  const keys = await crypto.subtle.generateKey(algorithm, true, ["sign", "verify"])
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: `CN=${commonName}`,
    notBefore: new Date(now.getTime() - backdate),
    notAfter: new Date(now.getTime() + serverLifetime),
    signingAlgorithm: algorithm,
    keys,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension(sans.map((value) => ({ type: isIP(value) === 0 ? "dns" : "ip", value })))
    ]
  })
  return { cert: cert.toString("pem"), key: await exportKey(keys.privateKey) }
}
