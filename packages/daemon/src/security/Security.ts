/**
 * The server's security pipeline, composed (DESIGN §10): authenticators (bootstrap token first,
 * then what Authentication contributes), the authorizer (default deny once RBAC is in; until
 * then the bootstrap admin is the only identity), admission plugins, the stored-value
 * transformer (encryption at rest), the audit sink, and extra subresources.
 */
import { Authn, Authz, Transformer } from "@koder/fleet-core"
import { Effect, type Scope } from "effect"
import * as AdmissionChain from "./AdmissionChain.js"
import * as Authentication from "./Authentication.js"
import * as Authorization from "./Authorization.js"
import type { Context, Contribution } from "./Context.js"

/** Everything the API server needs from security. */
export type Security = Required<Pick<Contribution, "authorize" | "admission" | "transformer" | "subresources" | "banner">> & {
  readonly authenticate: ReturnType<typeof Authn.chain>
  readonly audit: Contribution["audit"]
}

/** Build the pipeline from its components, in their order. */
export const make = (context: Context): Effect.Effect<Security, never, Scope.Scope> =>
  Effect.gen(function* () {
    const parts: ReadonlyArray<Contribution> = [
      yield* Authentication.make(context),
      yield* Authorization.make(context),
      yield* AdmissionChain.make(context)
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
