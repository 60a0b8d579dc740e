/**
 * DefaultServiceAccount admission (kube's ServiceAccount plugin): a pod without
 * `spec.serviceAccountName` runs as `default`. With `tokenVolume`, a pod whose token is to be
 * automounted (`spec.automountServiceAccountToken`, else the ServiceAccount's, else true) gets
 * the projected `kube-api-access-<suffix>` volume (token, cluster CA, namespace) mounted read-only
 * at `/var/run/secrets/kubernetes.io/serviceaccount` in every container that has nothing there.
 * With `requireServiceAccount`, a pod naming a ServiceAccount that does not exist is refused.
 * Mirror pods (static pods a node reports) are left alone, as in Kubernetes.
 */
import { Effect, Either } from "effect"
import type * as Admission from "../api/Admission.js"
import * as ApiError from "../api/ApiError.js"
import * as Objects from "../api/Objects.js"
import { identity, type Transformer } from "../api/Transformer.js"
import * as Status from "../model/Status.js"
import { asArray, asObject, type JsonObject } from "../object/Json.js"
import { metadataOf } from "../object/Metadata.js"
import type { StoreService } from "../store/Store.js"
import { getObject } from "./internal/json.js"

/** The plugin's name. */
export const name = "DefaultServiceAccount"

/** The ServiceAccount a pod runs as when it names none. */
export const defaultName = "default"

/** Where the token volume is mounted. */
export const mountPath = "/var/run/secrets/kubernetes.io/serviceaccount"

/** The annotation marking a mirror pod. */
export const mirrorAnnotation = "kubernetes.io/config.mirror"

/** How the plugin behaves. */
export interface Options {
  /** Inject the projected token volume (default false: until the agent projects tokens). */
  readonly tokenVolume?: boolean
  /** Refuse pods whose ServiceAccount does not exist (default false). */
  readonly requireServiceAccount?: boolean
}

/** What is known about the pod's ServiceAccount: absent, or its automount setting. */
export type Account = { readonly _tag: "Missing" } | { readonly _tag: "Present"; readonly automount: boolean | undefined }

const tokenVolume = (volumeName: string): JsonObject => ({
  name: volumeName,
  projected: {
    defaultMode: 420,
    sources: [
      { serviceAccountToken: { expirationSeconds: 3607, path: "token" } },
      { configMap: { name: "kube-root-ca.crt", items: [{ key: "ca.crt", path: "ca.crt" }] } },
      { downwardAPI: { items: [{ path: "namespace", fieldRef: { apiVersion: "v1", fieldPath: "metadata.namespace" } }] } }
    ]
  }
})

const mount = (volumeName: string) => (c: unknown): JsonObject => {
  const container = asObject(c)
  const mounts = asArray(container["volumeMounts"])
  if (mounts.some((m) => asObject(m)["mountPath"] === mountPath)) return container
  return { ...container, volumeMounts: [...mounts, { name: volumeName, readOnly: true, mountPath }] }
}

/** Whether a pod is a mirror pod. */
export const isMirror = (pod: JsonObject): boolean => asObject(metadataOf(pod)["annotations"])[mirrorAnnotation] !== undefined

/** The admitted pod (pure): the ServiceAccount defaulted and, when asked, the token volume added. */
export const decide = (pod: JsonObject, account: Account | undefined, options: Options, suffix: string): Either.Either<JsonObject, string> => {
  if (isMirror(pod)) return Either.right(pod)
  const spec = asObject(pod["spec"])
  const sa = typeof spec["serviceAccountName"] === "string" && spec["serviceAccountName"] !== "" ? spec["serviceAccountName"] : defaultName
  if (options.requireServiceAccount === true && account?._tag === "Missing") {
    return Either.left(`error looking up service account ${String(metadataOf(pod)["namespace"] ?? "")}/${sa}: serviceaccount "${sa}" not found`)
  }
  let next: JsonObject = { ...spec, serviceAccountName: sa }
  const automount =
    typeof spec["automountServiceAccountToken"] === "boolean"
      ? spec["automountServiceAccountToken"]
      : account?._tag === "Present" && account.automount !== undefined
        ? account.automount
        : true
  const hasVolume = asArray(spec["volumes"]).some((v) => String(asObject(v)["name"] ?? "").startsWith("kube-api-access-"))
  if (options.tokenVolume === true && automount && !hasVolume) {
    const volumeName = `kube-api-access-${suffix}`
    next = {
      ...next,
      volumes: [...asArray(spec["volumes"]), tokenVolume(volumeName)],
      containers: asArray(spec["containers"]).map(mount(volumeName)),
      ...(spec["initContainers"] === undefined ? {} : { initContainers: asArray(spec["initContainers"]).map(mount(volumeName)) })
    }
  }
  return Either.right({ ...pod, spec: next })
}

/** The plugin; reads ServiceAccounts from `store` only when an option needs them. */
export const make = (
  options: Options & { readonly store: StoreService; readonly transformer?: Transformer; readonly random?: () => number }
): Admission.Plugin => ({
  name,
  mutate: (request) =>
    Effect.gen(function* () {
      const r = request.resource
      if (request.operation !== "CREATE" || r.group !== "" || r.plural !== "pods" || request.subresource !== "") return request.object
      const spec = asObject(request.object["spec"])
      const sa = typeof spec["serviceAccountName"] === "string" && spec["serviceAccountName"] !== "" ? spec["serviceAccountName"] : defaultName
      let account: Account | undefined
      if (options.tokenVolume === true || options.requireServiceAccount === true) {
        const found = yield* getObject(options.store, options.transformer ?? identity, { group: "", plural: "serviceaccounts", namespace: request.namespace, name: sa })
        const automount = found === undefined ? undefined : found.object["automountServiceAccountToken"]
        account = found === undefined ? { _tag: "Missing" } : { _tag: "Present", automount: typeof automount === "boolean" ? automount : undefined }
      }
      const decided = decide(request.object, account, options, Objects.randomSuffix(options.random ?? Math.random))
      if (Either.isLeft(decided)) return yield* Effect.fail(ApiError.of(Status.forbidden("pods", request.name, decided.left)))
      return decided.right
    })
})
