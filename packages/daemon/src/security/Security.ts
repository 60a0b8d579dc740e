/**
 * The server's security pipeline, composed (DESIGN §10): authenticators (bootstrap token first,
 * then what Authentication contributes), the authorizer (default deny once RBAC is in; until
 * then the bootstrap admin is the only identity), admission plugins, the stored-value
 * transformer (encryption at rest), the audit sink, and extra subresources.
 */
import { Authn, Authz, Transformer } from "@koder/fleet-core"
import { Effect, type Scope } from "effect"
import { join } from "node:path"
import { ConfigError } from "../DaemonError.js"
import * as AdmissionChain from "./AdmissionChain.js"
import * as AuditLog from "./AuditLog.js"
import * as Authentication from "./Authentication.js"
import * as Authorization from "./Authorization.js"
import type { Context, Contribution } from "./Context.js"
import * as Encryption from "./Encryption.js"

/** Everything the API server needs from security. */
export type Security = Required<Pick<Contribution, "authorize" | "admission" | "transformer" | "subresources" | "banner">> & {
  readonly authenticate: ReturnType<typeof Authn.chain>
  readonly audit: Contribution["audit"]
}

const flag = (context: Context, name: string): string | undefined => {
  const v = context.flags[name]
  return typeof v === "string" ? v : undefined
}

const count = (context: Context, name: string, fallback: number) => {
  const v = flag(context, name)
  if (v === undefined) return Effect.succeed(fallback)
  const n = Number(v)
  return Number.isInteger(n) && n >= 0 ? Effect.succeed(n) : Effect.fail(new ConfigError({ message: `--${name} ${JSON.stringify(v)}: expected a non-negative integer` }))
}

/** Encryption at rest and the audit log: always on (secure by default). */
const atRest = (context: Context): Effect.Effect<Contribution, ConfigError, Scope.Scope> =>
  Effect.gen(function* () {
    const keys = yield* Encryption.loadKeys({ dataDir: context.dataDir, keyFile: flag(context, "encryption-key-file"), kmsUrl: flag(context, "kms-url") })
    const audit = yield* AuditLog.make({
      file: flag(context, "audit-log") ?? join(context.dataDir, "audit.log"),
      maxBytes: yield* count(context, "audit-log-max-bytes", 100 * 1024 * 1024),
      maxBackups: yield* count(context, "audit-log-max-backups", 5)
    })
    return { transformer: Encryption.transformer(keys), audit }
  })

/** Build the pipeline from its components, in their order. */
export const make = (context: Context): Effect.Effect<Security, ConfigError, Scope.Scope> =>
  Effect.gen(function* () {
    const parts: ReadonlyArray<Contribution> = [
      yield* Authentication.make(context),
      yield* Authorization.make(context),
      yield* AdmissionChain.make(context),
      yield* atRest(context)
    ]
    const audits = parts.flatMap((p) => (p.audit ? [p.audit] : []))
    return {
      authenticate: Authn.chain([Authn.staticToken(context.bootstrapTokenHash, Authn.bootstrapAdmin), ...parts.flatMap((p) => p.authenticators ?? [])]),
      authorize: parts.find((p) => p.authorize)?.authorize ?? Authz.allowAll,
      admission: parts.flatMap((p) => p.admission ?? []),
      transformer: parts.find((p) => p.transformer)?.transformer ?? Transformer.identity,
      audit: audits.length === 0 ? undefined : (record) => audits.forEach((a) => a(record)),
      subresources: parts.flatMap((p) => p.subresources ?? []),
      banner: parts.flatMap((p) => p.banner ?? [])
    }
  })
