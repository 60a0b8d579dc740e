import { Effect } from "effect"
import { describe, expect, it } from "@effect/vitest"
import * as ObjectCache from "../../src/agent/ObjectCache.js"
import * as TokenCache from "../../src/agent/TokenCache.js"
import * as VolumeLookup from "../../src/agent/VolumeLookup.js"
import * as ApiError from "../../src/api/ApiError.js"
import type * as Client from "../../src/client/Client.js"
import type * as Pod from "../../src/model/Pod.js"
import * as Status from "../../src/model/Status.js"

// A client answering GETs from `kind/namespace/name` and issuing one token per request.
const client = (objects: Record<string, Record<string, unknown>>) => {
  const gets: Array<string> = []
  const c = {
    get: (ref: Client.ResourceRef, namespace: string | undefined, name: string) =>
      Effect.suspend(() => {
        const key = `${ref.kind}/${namespace ?? ""}/${name}`
        gets.push(key)
        const o = objects[key]
        return o === undefined ? Effect.fail(ApiError.of(Status.notFound(ref.kind ?? "", name))) : Effect.succeed(o)
      }),
    createSubresource: (_ref: unknown, _ns: unknown, name: string) => Effect.succeed({ status: { token: `token-of-${name}` } })
  } as unknown as Client.Client
  return { client: c, gets }
}

const pod: Pod.Pod = {
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "web", namespace: "default", uid: "u1" },
  spec: {
    serviceAccountName: "builder",
    containers: [{ name: "app", image: "x", envFrom: [{ configMapRef: { name: "env" } }] }],
    volumes: [
      { name: "conf", configMap: { name: "conf" } },
      { name: "creds", secret: { secretName: "creds" } },
      { name: "data", persistentVolumeClaim: { claimName: "data" } },
      { name: "lost", persistentVolumeClaim: { claimName: "unbound" } },
      { name: "token", projected: { sources: [{ serviceAccountToken: { path: "token", audience: "vault", expirationSeconds: 600 } }] } }
    ]
  }
}

describe("VolumeLookup", () => {
  it.effect("fetches what the pod refers to, the volumes its claims are bound to, and its tokens", () =>
    Effect.gen(function* () {
      const { client: c, gets } = client({
        "ConfigMap/default/env": { data: { A: "1" } },
        "ConfigMap/default/conf": { data: { f: "x" } },
        "Secret/default/creds": { data: { p: "eA==" } },
        "PersistentVolumeClaim/default/data": { spec: { volumeName: "pv-1" } },
        "PersistentVolumeClaim/default/unbound": { spec: {} },
        "PersistentVolume//pv-1": { spec: { hostPath: { path: "/srv" } } }
      })
      const lookup = yield* VolumeLookup.lookupFor(ObjectCache.make(c, 5_000), TokenCache.make(c), pod)
      expect(lookup.configMap("env")).toEqual({ data: { A: "1" } })
      expect(lookup.configMap("conf")).toEqual({ data: { f: "x" } })
      expect(lookup.configMap("other")).toBeUndefined()
      expect(lookup.secret("creds")).toEqual({ data: { p: "eA==" } })
      expect(lookup.claim("data")).toEqual({ spec: { volumeName: "pv-1" } })
      expect(lookup.volume("pv-1")).toEqual({ spec: { hostPath: { path: "/srv" } } })
      expect(lookup.token({ serviceAccountName: "builder", audience: "vault", expirationSeconds: 600 })).toBe("token-of-builder")
      expect(lookup.token({ serviceAccountName: "builder", audience: "", expirationSeconds: 600 })).toBeUndefined()
      // Claims are read before their volumes; an unbound claim asks for no volume.
      expect(gets.indexOf("PersistentVolume//pv-1")).toBeGreaterThan(gets.indexOf("PersistentVolumeClaim/default/data"))
      expect(gets.filter((g) => g.startsWith("PersistentVolume/"))).toEqual(["PersistentVolume//pv-1"])
    })
  )

  it.effect("an absent object is undefined; another API error fails the lookup", () =>
    Effect.gen(function* () {
      const { client: c } = client({})
      const lookup = yield* VolumeLookup.lookupFor(ObjectCache.make(c, 5_000), TokenCache.make(c), pod)
      expect(lookup.configMap("conf")).toBeUndefined()
      const failing = { ...c, get: () => Effect.fail(ApiError.of(Status.badRequest("no"))) } as unknown as Client.Client
      const failed = yield* Effect.either(VolumeLookup.lookupFor(ObjectCache.make(failing, 5_000), TokenCache.make(c), pod))
      expect(failed._tag).toBe("Left")
    })
  )
})
