import { Effect, TestClock } from "effect"
import { describe, expect, it } from "@effect/vitest"
import * as TokenCache from "../../src/agent/TokenCache.js"
import type * as VolumePlan from "../../src/agent/VolumePlan.js"
import * as ApiError from "../../src/api/ApiError.js"
import type * as Client from "../../src/client/Client.js"
import type * as Pod from "../../src/model/Pod.js"
import * as Status from "../../src/model/Status.js"

const pod: Pod.Pod = { apiVersion: "v1", kind: "Pod", metadata: { name: "web", namespace: "default", uid: "u1" }, spec: { containers: [{ name: "app", image: "x" }] } }
const request: VolumePlan.TokenRequest = { serviceAccountName: "default", audience: "", expirationSeconds: 3600 }

// A client issuing `token-<n>` per TokenRequest, or failing while `down`.
const issuing = () => {
  const state = { down: false, empty: false, requests: [] as Array<{ readonly name: string; readonly body: unknown }> }
  const client = {
    createSubresource: (_ref: unknown, _ns: unknown, name: string, sub: string, body: unknown) =>
      Effect.suspend(() => {
        expect(sub).toBe("token")
        state.requests.push({ name, body })
        if (state.down) return Effect.fail(ApiError.of(Status.badRequest("down")))
        return Effect.succeed({ status: state.empty ? {} : { token: `token-${state.requests.length}` } })
      })
  } as unknown as Client.Client
  return { client, state }
}

describe("TokenCache", () => {
  it("tokenRequest: bound to the pod, audiences only when one is named", () => {
    expect(TokenCache.tokenRequest(pod, request)).toEqual({
      apiVersion: "authentication.k8s.io/v1",
      kind: "TokenRequest",
      spec: { expirationSeconds: 3600, boundObjectRef: { apiVersion: "v1", kind: "Pod", name: "web", uid: "u1" } }
    })
    expect(TokenCache.tokenRequest(pod, { ...request, audience: "vault" }).spec.audiences).toEqual(["vault"])
  })

  it.effect("reuses a token until 80% of its life, keeps a valid one while the API fails, none after it expires", () =>
    Effect.gen(function* () {
      const { client, state } = issuing()
      const cache = TokenCache.make(client)
      expect(yield* cache.token(pod, request)).toBe("token-1")
      yield* TestClock.adjust("2879 seconds")
      expect(yield* cache.token(pod, request)).toBe("token-1")
      expect(state.requests).toHaveLength(1)
      yield* TestClock.adjust("1 second")
      expect(yield* cache.token(pod, request)).toBe("token-2")
      state.down = true
      yield* TestClock.adjust("2880 seconds")
      expect(yield* cache.token(pod, request)).toBe("token-2")
      yield* TestClock.adjust("720 seconds")
      expect(yield* cache.token(pod, request)).toBeUndefined()
    })
  )

  it.effect("one token per pod, account, audience and lifetime; an empty answer is no token", () =>
    Effect.gen(function* () {
      const { client, state } = issuing()
      const cache = TokenCache.make(client)
      yield* cache.token(pod, request)
      yield* cache.token(pod, { ...request, audience: "vault" })
      yield* cache.token(pod, { ...request, expirationSeconds: 600 })
      yield* cache.token({ ...pod, metadata: { ...pod.metadata, uid: "u2" } }, request)
      expect(state.requests).toHaveLength(4)
      state.empty = true
      expect(yield* cache.token(pod, { ...request, serviceAccountName: "other" })).toBeUndefined()
      expect(cache.state.entries.size).toBe(4)
    })
  )
})
