/**
 * What every security component of the server is built from: the configuration, the open store,
 * the data dir, and the bootstrap admin's token hash. Each component (authentication,
 * authorization, admission, encryption, audit) has its own module and is composed in Security.ts.
 */
import type { Admission, ApiServer, Authn, Authz, Registry, Store, Transformer } from "@koder/fleet-core"

/** Inputs shared by the security components. */
export interface Context {
  readonly dataDir: string
  readonly store: Store.StoreService
  readonly registry: Registry.Registry
  /** `sha256:<hex>` of the bootstrap admin token. */
  readonly bootstrapTokenHash: string
  /** The address clients reach the server at (`host:port`). */
  readonly address: string
  /** The region label of new objects (`--region`; default "local"). */
  readonly region?: string
  /** The CA certificate clients trust (PEM), as written into the kubeconfig, when there is one. */
  readonly caPem?: string | undefined
  /** The hub role: members join instead of nodes. */
  readonly hub?: boolean
  /** Raw command-line flags of the security components (`--oidc-issuer-url`, `--encryption-key-file`, …). */
  readonly flags: Readonly<Record<string, string | ReadonlyArray<string> | boolean | undefined>>
}

/** What a component contributes to the API server (all optional). */
export interface Contribution {
  readonly authenticators?: ReadonlyArray<Authn.Authenticator>
  readonly authorize?: Authz.Authorizer
  readonly admission?: ReadonlyArray<Admission.Plugin>
  readonly transformer?: Transformer.Transformer
  readonly audit?: (record: ApiServer.AuditRecord) => void
  readonly subresources?: ReadonlyArray<ApiServer.SubresourceHandler>
  /** Lines printed once the server listens (e.g. how to join a node). */
  readonly banner?: ReadonlyArray<string>
}
