/**
 * Everything a pod's volumes and environment refer to, fetched through the object and token
 * caches before the pod's volumes are planned: its ConfigMaps, Secrets and claims at once, then
 * the volumes the claims are bound to, then its service account tokens.
 */
import { Effect } from "effect"
import type * as ApiError from "../api/ApiError.js"
import type * as Client from "../client/Client.js"
import type * as Config from "../model/Config.js"
import type * as Pod from "../model/Pod.js"
import type * as Volume from "../model/Volume.js"
import type { JsonObject } from "../object/Json.js"
import * as ResourceRefs from "../object/ResourceRefs.js"
import * as Views from "../object/Views.js"
import type * as ObjectCache from "./ObjectCache.js"
import type * as TokenCache from "./TokenCache.js"
import * as VolumePlan from "./VolumePlan.js"

// The model type of an object fetched (`Views.view` says why no decode runs).
const typed = <K>(o: JsonObject | undefined): K | undefined => (o === undefined ? undefined : Views.view<K>(o))

const tokenKey = (t: VolumePlan.TokenRequest) => `${t.serviceAccountName}/${t.audience}/${t.expirationSeconds}`

/** The lookup `VolumePlan.plan` and `ContainerEnv.resolve` read `pod`'s references from. */
export const lookupFor = (objects: ObjectCache.ObjectCache, tokens: TokenCache.TokenCache, pod: Pod.Pod): Effect.Effect<VolumePlan.Lookup, ApiError.ApiError> =>
  Effect.gen(function* () {
    const ns = pod.metadata.namespace
    const refs = VolumePlan.references(pod)
    const fetchAll = (ref: Client.ResourceRef, names: ReadonlyArray<string>, namespace: string | undefined) =>
      Effect.map(
        Effect.forEach(names, (n) => Effect.map(objects.get(ref, namespace, n), (o) => [n, o] as const), { concurrency: "unbounded" }),
        (pairs) => new Map(pairs)
      )
    const [configMaps, secrets, claims] = yield* Effect.all(
      [fetchAll(ResourceRefs.ConfigMap, refs.configMaps, ns), fetchAll(ResourceRefs.Secret, refs.secrets, ns), fetchAll(ResourceRefs.PersistentVolumeClaim, refs.claims, ns)],
      { concurrency: "unbounded" }
    )
    const volumeNames = [...claims.values()].flatMap((c) => {
      const v = c === undefined ? undefined : Views.persistentVolumeClaim(c).spec?.volumeName
      return typeof v === "string" && v !== "" ? [v] : []
    })
    const volumes = yield* fetchAll(ResourceRefs.PersistentVolume, volumeNames, undefined)
    const tokenValues = new Map<string, string | undefined>()
    for (const t of refs.tokens) tokenValues.set(tokenKey(t), yield* tokens.token(pod, t))
    const lookup: VolumePlan.Lookup = {
      configMap: (n) => typed<Config.ConfigMap>(configMaps.get(n)),
      secret: (n) => typed<Config.Secret>(secrets.get(n)),
      claim: (n) => typed<Volume.PersistentVolumeClaim>(claims.get(n)),
      volume: (n) => typed<Volume.PersistentVolume>(volumes.get(n)),
      token: (t) => tokenValues.get(tokenKey(t))
    }
    return lookup
  })
