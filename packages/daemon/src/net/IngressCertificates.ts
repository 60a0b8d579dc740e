/**
 * The TLS listener's certificates: chosen by SNI from the Secret the matching Ingress names
 * (`kubernetes.io/tls`, read from an informer), a secure context per Secret cached by its
 * resourceVersion, and a self-signed default for unknown names and unusable Secrets.
 */
import { type Client, Informer, IngressRoutes } from "@koder/fleet-core"
import { Effect, type Scope } from "effect"
import { createSecureContext, type SecureContext } from "node:tls"
import { describe } from "../DaemonError.js"
import * as Tls from "../Tls.js"

const SecretRef: Client.ResourceRef = { apiVersion: "v1", kind: "Secret" }

/** The certificates' sources and the contexts made so far. */
export interface Certificates {
  /** The default certificate's PEM (the server's own options). */
  readonly fallbackPem: { readonly cert: string; readonly key: string }
  readonly fallback: SecureContext
  readonly secrets: Informer.Informer
  readonly table: () => IngressRoutes.RouteTable
  readonly log: (line: string) => void
  /** By `namespace/name`: the context of the Secret at a resourceVersion (undefined: unusable). */
  readonly contexts: Map<string, { readonly version: string; readonly context: SecureContext | undefined }>
}

/** Start the informer of the cluster's `kubernetes.io/tls` Secrets. */
export const secrets = (client: Client.Client): Effect.Effect<Informer.Informer, never, Scope.Scope> =>
  Informer.make(client, SecretRef, { fieldSelector: "type=kubernetes.io/tls" })

/** Make the default certificate; contexts are made on first use. */
export const make = (secrets: Informer.Informer, table: () => IngressRoutes.RouteTable, log: (line: string) => void): Effect.Effect<Certificates> =>
  Effect.map(
    Effect.promise(() => Tls.selfSigned("Koder Fleet ingress default certificate", ["ingress.fleet.invalid"])),
    (fallbackPem) => ({ fallbackPem, fallback: createSecureContext(fallbackPem), secrets, table, log, contexts: new Map() })
  )

/** The context of an Ingress's TLS Secret (undefined: missing or unusable, logged once per version). */
const contextOf = (certs: Certificates, source: IngressRoutes.TlsSource): SecureContext | undefined => {
  const secret = certs.secrets.get(source.namespace, source.secretName)
  const version = secret === undefined ? "" : String((secret["metadata"] as Record<string, unknown>)["resourceVersion"])
  const key = `${source.namespace}/${source.secretName}`
  const cached = certs.contexts.get(key)
  if (cached !== undefined && cached.version === version) return cached.context
  let context: SecureContext | undefined
  const data = (secret?.["data"] ?? {}) as Record<string, string | undefined>
  if (secret === undefined) certs.log(`Ingress ${source.ingress}: TLS Secret ${key} (type kubernetes.io/tls) not found; serving the default certificate`)
  else {
    try {
      context = createSecureContext({ cert: Buffer.from(data["tls.crt"] ?? "", "base64"), key: Buffer.from(data["tls.key"] ?? "", "base64") })
    } catch (e) {
      certs.log(`Ingress ${source.ingress}: TLS Secret ${key}: ${describe(e)}; serving the default certificate`)
    }
  }
  certs.contexts.set(key, { version, context })
  return context
}

/** The server's `SNICallback`: the context for `name`, else the default. */
export const sni = (certs: Certificates) => (name: string, done: (err: Error | null, ctx?: SecureContext) => void): void => {
  const source = IngressRoutes.tlsFor(certs.table(), name)
  done(null, (source === undefined ? undefined : contextOf(certs, source)) ?? certs.fallback)
}
