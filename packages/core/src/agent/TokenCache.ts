/**
 * Service account tokens for projected volumes, asked of the API (`serviceaccounts/token`, bound
 * to the pod) and reused until 80% of their life, as the kubelet's token manager. When the API
 * cannot be reached, a token still valid is kept.
 */
import { Clock, Effect } from "effect"
import type * as Client from "../client/Client.js"
import type * as Pod from "../model/Pod.js"
import { asObject, asString } from "../object/Json.js"
import * as ResourceRefs from "../object/ResourceRefs.js"
import type * as VolumePlan from "./VolumePlan.js"

/** A token and when it is refreshed and expires. */
export interface Entry {
  readonly token: string
  readonly refreshAtMs: number
  readonly expiresAtMs: number
}

/** The cache's state: tokens by pod uid, service account, audience and lifetime. */
export interface State {
  readonly entries: Map<string, Entry>
}

/** A token cache over one client. */
export interface TokenCache {
  readonly state: State
  /** The token `request` asks for on behalf of `pod`, or `undefined` when there is none. */
  readonly token: (pod: Pod.Pod, request: VolumePlan.TokenRequest) => Effect.Effect<string | undefined>
}

/** The TokenRequest body for `request`, bound to `pod`. */
export const tokenRequest = (pod: Pod.Pod, request: VolumePlan.TokenRequest) => ({
  apiVersion: "authentication.k8s.io/v1",
  kind: "TokenRequest",
  spec: {
    ...(request.audience === "" ? {} : { audiences: [request.audience] }),
    expirationSeconds: request.expirationSeconds,
    boundObjectRef: { apiVersion: "v1", kind: "Pod", name: pod.metadata.name, uid: pod.metadata.uid }
  }
})

/** A cache asking `client` for tokens. */
export const make = (client: Client.Client, state: State = { entries: new Map() }): TokenCache => ({
  state,
  token: (pod, request) =>
    Effect.gen(function* () {
      const key = `${pod.metadata.uid ?? ""}/${request.serviceAccountName}/${request.audience}/${request.expirationSeconds}`
      const now = yield* Clock.currentTimeMillis
      const hit = state.entries.get(key)
      if (hit !== undefined && now < hit.refreshAtMs) return hit.token
      const answer = yield* Effect.either(
        client.createSubresource(ResourceRefs.ServiceAccount, pod.metadata.namespace, request.serviceAccountName, "token", tokenRequest(pod, request))
      )
      if (answer._tag === "Left") return hit !== undefined && now < hit.expiresAtMs ? hit.token : undefined
      const token = asString(asObject(answer.right["status"])["token"])
      if (token === "") return undefined
      // The kubelet refreshes a projected token at 80% of its life.
      state.entries.set(key, { token, expiresAtMs: now + request.expirationSeconds * 1000, refreshAtMs: now + request.expirationSeconds * 800 })
      return token
    })
})
