/**
 * The bootstrap administrator's credentials (DESIGN §10): on first start a random token (32
 * bytes, base64url) is minted, only its hash is kept (`DIR/bootstrap-token.sha256`), the token is
 * shown once, and it goes into `DIR/kubeconfig` — the only place it is ever written.
 *
 *   hash file missing ─▶ mint ─▶ listen ─▶ write kubeconfig ─▶ write hash ─▶ print token once
 *   hash file present ─▶ listen ─▶ kubeconfig holds the token? ─▶ refresh its server/CA if changed
 *
 * The hash is written after the kubeconfig, so a crash in between mints a fresh token next time
 * instead of leaving a hash whose token nobody has.
 */
import { Authn } from "@koder/fleet-core"
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import { join } from "node:path"
import { BootstrapError, describe } from "./DaemonError.js"
import { readIfExists, writeAtomic } from "./internal/files.js"
import * as Kubeconfig from "./Kubeconfig.js"

/** The files of the bootstrap credentials inside the data dir. */
export const files = (dataDir: string) => ({
  hash: join(dataDir, "bootstrap-token.sha256"),
  kubeconfig: join(dataDir, "kubeconfig")
})

/** The bootstrap token of this start: freshly minted (to publish), or known only by its hash. */
export type Credentials =
  | { readonly _tag: "Minted"; readonly token: string; readonly hash: string }
  | { readonly _tag: "Stored"; readonly hash: string }

/** What publishing did. */
export interface Published {
  readonly kubeconfig: string
  /** The token to show the operator: only when it was minted by this start. */
  readonly newToken: string | undefined
  /** Something the operator should know (e.g. the kubeconfig no longer holds the token). */
  readonly warning: string | undefined
}

const fail = (what: string) => (e: unknown) => new BootstrapError({ message: `${what}: ${describe(e)}` })

/** A new random token: 32 bytes, base64url. */
export const mintToken = (): string => randomBytes(32).toString("base64url")

/** Load the stored hash, or mint a token when there is none. */
export const load = (dataDir: string): Effect.Effect<Credentials, BootstrapError> =>
  Effect.gen(function* () {
    const stored = yield* Effect.tryPromise({ try: () => readIfExists(files(dataDir).hash), catch: fail("reading the bootstrap token hash") })
    const hash = stored?.trim()
    if (hash !== undefined && /^sha256:[0-9a-f]{64}$/.test(hash)) return { _tag: "Stored", hash } as const
    if (hash !== undefined && hash !== "") {
      return yield* Effect.fail(new BootstrapError({ message: `${files(dataDir).hash} is not a token hash (sha256:<64 hex>); remove it to mint a new token` }))
    }
    const token = mintToken()
    return { _tag: "Minted", token, hash: yield* Authn.hashToken(token) } as const
  })

/**
 * Write what clients need to reach the server: a new kubeconfig for a minted token, or the
 * current server URL and CA into the existing one.
 */
export const publish = (dataDir: string, credentials: Credentials, cluster: { readonly server: string; readonly caPem: string | undefined }): Effect.Effect<Published, BootstrapError> =>
  Effect.gen(function* () {
    const f = files(dataDir)
    if (credentials._tag === "Minted") {
      yield* Effect.tryPromise({
        try: async () => {
          await writeAtomic(f.kubeconfig, Kubeconfig.render({ ...cluster, token: credentials.token }), 0o600)
          await writeAtomic(f.hash, `${credentials.hash}\n`, 0o600)
        },
        catch: fail("writing the kubeconfig")
      })
      return { kubeconfig: f.kubeconfig, newToken: credentials.token, warning: undefined }
    }
    const text = yield* Effect.tryPromise({ try: () => readIfExists(f.kubeconfig), catch: fail("reading the kubeconfig") })
    const token = text === undefined ? undefined : Kubeconfig.tokenOf(text)
    const holdsToken = token !== undefined && Authn.constantTimeEqual(yield* Authn.hashToken(token), credentials.hash)
    if (text === undefined || !holdsToken) {
      // Never rotate a credential silently: the operator decides.
      const warning = `${f.kubeconfig} is missing or no longer holds the bootstrap token; remove ${f.hash} and restart to mint a new one`
      return { kubeconfig: f.kubeconfig, newToken: undefined, warning }
    }
    const current = Kubeconfig.clusterOf(text)
    if (current?.server !== cluster.server || current.caPem !== cluster.caPem) {
      const updated = Kubeconfig.update(text, cluster)
      if (updated !== undefined) yield* Effect.tryPromise({ try: () => writeAtomic(f.kubeconfig, updated, 0o600), catch: fail("updating the kubeconfig") })
    }
    return { kubeconfig: f.kubeconfig, newToken: undefined, warning: undefined }
  })
