/**
 * ServiceAccount tokens: JWTs the server signs for a ServiceAccount (Kubernetes' bound tokens),
 * issued through the TokenRequest subresource (`POST .../serviceaccounts/{name}/token`) and
 * accepted by an authenticator that checks signature, issuer, audience, lifetime, and that the
 * ServiceAccount still exists with the uid the token was issued for, so deleting the account
 * revokes every token of it. A token bound to a pod (`spec.boundObjectRef`, as the agent's
 * projected tokens are) also dies with that pod; a node may only mint tokens bound to a pod of
 * its own running as that ServiceAccount (kube's NodeRestriction).
 *
 *   TokenRequest ─▶ SA exists? ─▶ bound pod exists (uid, account, node)? ─▶ sign {iss, sub, aud, exp, kubernetes.io} ─▶ status.token
 *   Bearer JWT ─▶ iss ours? ─▶ verify (key, iss, aud, exp, nbf) ─▶ SA uid unchanged? ─▶ bound pod still there? ─▶ user
 */
import { Clock, Effect, Either, Option } from "effect"
import * as jose from "jose"
import * as FieldError from "../../model/FieldError.js"
import * as Status from "../../model/Status.js"
import { asObject } from "../../object/Json.js"
import * as Keys from "../../store/Keys.js"
import type { StoreService } from "../../store/Store.js"
import * as ApiError from "../ApiError.js"
import { InvalidKey } from "../ApiError.js"
import type { SubresourceHandler } from "../ApiServer.js"
import type { Authenticator } from "../Authn.js"
import { bearer } from "../Authn.js"
import * as Body from "../Body.js"
import { json, type UserInfo } from "../Http.js"
import * as Objects from "../Objects.js"
import { nodeNameOf } from "./NodeCredentials.js"

/** The issuer Kubernetes uses unless told otherwise. */
export const defaultIssuer = "https://kubernetes.default.svc"

/** The shortest lifetime a TokenRequest may ask for (Kubernetes: 10 minutes). */
export const minExpirationSeconds = 600

/** The lifetime of a TokenRequest that names none. */
export const defaultExpirationSeconds = 3600

/** The longest lifetime a token gets; longer requests are cut to this. */
export const defaultMaxExpirationSeconds = 48 * 3600

// Defined in the API layer's error module; re-exported so `ServiceAccountTokens.InvalidKey` stays.
export { InvalidKey }

/** The server's signing key pair. */
export interface SigningKey {
  readonly alg: "ES256" | "RS256"
  readonly privateKey: jose.CryptoKey
  readonly publicKey: jose.CryptoKey
  /** The key id put in every token header: the public key's JWK thumbprint. */
  readonly kid: string
}

/** What issuing and verifying need. */
export interface Config {
  readonly key: SigningKey
  /** `iss` of issued tokens; tokens with another issuer are not this authenticator's. */
  readonly issuer: string
  /** Audiences the API accepts; a TokenRequest without audiences gets these (default: the issuer). */
  readonly apiAudiences?: ReadonlyArray<string>
  /** Lifetimes above this are cut to it (default 48 h). */
  readonly maxExpirationSeconds?: number
}

const audiencesOf = (config: Config): ReadonlyArray<string> =>
  config.apiAudiences !== undefined && config.apiAudiences.length > 0 ? config.apiAudiences : [config.issuer]

const invalidKey = (what: string) => (e: unknown) => new InvalidKey({ message: `${what}: ${e instanceof Error ? e.message : String(e)}` })

/** A fresh ES256 key as PKCS#8 PEM, for the daemon to keep in its data dir. */
export const generateKeyPem: Effect.Effect<string, InvalidKey> = Effect.tryPromise({
  try: async () => {
    const { privateKey } = await jose.generateKeyPair("ES256", { extractable: true })
    return jose.exportPKCS8(privateKey)
  },
  catch: invalidKey("generating a ServiceAccount signing key")
})

const importAs = (pem: string, alg: SigningKey["alg"]) =>
  Effect.tryPromise({
    try: async (): Promise<SigningKey> => {
      const privateKey = await jose.importPKCS8(pem, alg, { extractable: true })
      const { d: _d, p: _p, q: _q, dp: _dp, dq: _dq, qi: _qi, ...pub } = await jose.exportJWK(privateKey)
      const publicKey = (await jose.importJWK({ ...pub, alg }, alg)) as jose.CryptoKey
      return { alg, privateKey, publicKey, kid: await jose.calculateJwkThumbprint(pub) }
    },
    catch: invalidKey(`reading the signing key as ${alg}`)
  })

/** Read a PKCS#8 PEM private key: an EC P-256 key signs ES256, an RSA key RS256. */
export const keyFromPem = (pem: string): Effect.Effect<SigningKey, InvalidKey> =>
  importAs(pem, "ES256").pipe(
    Effect.orElse(() => importAs(pem, "RS256")),
    Effect.mapError(() => new InvalidKey({ message: "the ServiceAccount signing key must be a PKCS#8 PEM EC P-256 or RSA private key" }))
  )

/** The user name of a ServiceAccount. */
export const userName = (namespace: string, name: string): string => `system:serviceaccount:${namespace}:${name}`

/** The user a ServiceAccount authenticates as. */
export const userOf = (namespace: string, name: string, uid: string): UserInfo => ({
  name: userName(namespace, name),
  uid,
  groups: ["system:serviceaccounts", `system:serviceaccounts:${namespace}`, "system:authenticated"]
})

/** Which ServiceAccount a token is for. */
export interface Subject {
  readonly namespace: string
  readonly name: string
  readonly uid: string
}

/** The pod a token is bound to: the token is valid only while a pod of that name and uid exists. */
export interface BoundPod {
  readonly name: string
  readonly uid: string
}

/** A signed token and when it expires (epoch seconds). */
export interface Issued {
  readonly token: string
  readonly expiresAt: number
}

/** Sign a token for `subject`, valid from `nowMillis` for `expirationSeconds` (already bounded). */
export const sign = (config: Config, subject: Subject, audiences: ReadonlyArray<string>, expirationSeconds: number, nowMillis: number, pod?: BoundPod): Effect.Effect<Issued> =>
  Effect.promise(async () => {
    const iat = Math.floor(nowMillis / 1000)
    const expiresAt = iat + expirationSeconds
    const token = await new jose.SignJWT({
      "kubernetes.io": {
        namespace: subject.namespace,
        serviceaccount: { name: subject.name, uid: subject.uid },
        ...(pod === undefined ? {} : { pod: { name: pod.name, uid: pod.uid } })
      }
    })
      .setProtectedHeader({ alg: config.key.alg, kid: config.key.kid })
      .setIssuer(config.issuer)
      .setSubject(userName(subject.namespace, subject.name))
      .setAudience([...audiences])
      .setIssuedAt(iat)
      .setNotBefore(iat)
      .setExpirationTime(expiresAt)
      .setJti(crypto.randomUUID())
      .sign(config.key.privateKey)
    return { token, expiresAt }
  })

const saKey = (namespace: string, name: string) => Keys.object({ group: "", resource: "serviceaccounts", namespace, name })

/** The stored ServiceAccount's uid, if it exists. */
const currentUid = (store: StoreService, namespace: string, name: string): Effect.Effect<Option.Option<string>> =>
  store.get(saKey(namespace, name)).pipe(
    Effect.map((kv) => {
      const uid = Objects.meta(Objects.fromStored(kv))["uid"]
      return typeof uid === "string" ? Option.some(uid) : Option.none()
    }),
    Effect.orElseSucceed(() => Option.none<string>())
  )

const podKey = (namespace: string, name: string) => Keys.object({ group: "", resource: "pods", namespace, name })

/** The stored pod, if it exists. */
const storedPod = (store: StoreService, namespace: string, name: string): Effect.Effect<Option.Option<Record<string, unknown>>> =>
  store.get(podKey(namespace, name)).pipe(
    Effect.map((kv) => Option.some(Objects.fromStored(kv))),
    Effect.orElseSucceed(() => Option.none<Record<string, unknown>>())
  )

/** How long a bound pod's tokens outlive the start of its deletion (Kubernetes: 60 s). */
export const boundPodGraceSeconds = 60

/** Whether the pod a token is bound to still stands (same uid, not deleting for longer than the grace). */
const podStands = (store: StoreService, namespace: string, pod: BoundPod, nowMillis: number): Effect.Effect<boolean> =>
  Effect.map(storedPod(store, namespace, pod.name), (found) => {
    if (Option.isNone(found)) return false
    const m = Objects.meta(found.value)
    const deleting = typeof m["deletionTimestamp"] === "string" ? Date.parse(m["deletionTimestamp"]) : NaN
    return m["uid"] === pod.uid && !(deleting + boundPodGraceSeconds * 1000 < nowMillis)
  })

interface Claims {
  readonly "kubernetes.io"?: {
    readonly namespace?: unknown
    readonly serviceaccount?: { readonly name?: unknown; readonly uid?: unknown }
    readonly pod?: { readonly name?: unknown; readonly uid?: unknown }
  }
}

const unverifiedIssuer = (token: string): string | undefined => {
  try {
    const iss = jose.decodeJwt(token).iss
    return typeof iss === "string" ? iss : undefined
  } catch {
    return undefined
  }
}

/**
 * Accepts tokens this server signed for a ServiceAccount that still exists with the same uid.
 * Tokens of another issuer are "not mine"; any failed check leaves the request unauthenticated.
 * The ServiceAccount is read from the store on every request, so deletion takes effect at once.
 */
export const authenticator = (config: Config, store: StoreService): Authenticator => (headers) =>
  Effect.gen(function* () {
    const token = bearer(headers)
    if (token === undefined || unverifiedIssuer(token) !== config.issuer) return Option.none()
    const verified = yield* Effect.either(
      Effect.tryPromise(() =>
        jose.jwtVerify<Claims>(token, config.key.publicKey, {
          issuer: config.issuer,
          audience: [...audiencesOf(config)],
          algorithms: [config.key.alg],
          requiredClaims: ["exp", "sub"]
        })
      )
    )
    if (Either.isLeft(verified)) return Option.none()
    const k8s = verified.right.payload["kubernetes.io"]
    const namespace = k8s?.namespace
    const name = k8s?.serviceaccount?.name
    const uid = k8s?.serviceaccount?.uid
    if (typeof namespace !== "string" || typeof name !== "string" || typeof uid !== "string") return Option.none()
    if (verified.right.payload.sub !== userName(namespace, name)) return Option.none()
    const stored = yield* currentUid(store, namespace, name)
    if (Option.isNone(stored) || stored.value !== uid) return Option.none()
    const pod = k8s?.pod
    if (pod !== undefined) {
      if (typeof pod.name !== "string" || typeof pod.uid !== "string") return Option.none()
      if (!(yield* podStands(store, namespace, { name: pod.name, uid: pod.uid }, yield* Clock.currentTimeMillis))) return Option.none()
    }
    return Option.some(userOf(namespace, name, uid))
  })

const invalid = (name: string, errors: ReadonlyArray<FieldError.FieldError>) =>
  ApiError.of(Status.invalid({ group: "authentication.k8s.io", kind: "TokenRequest" }, name, errors))

/** The `serviceaccounts/token` subresource: `POST` a TokenRequest, get it back with a token. */
export const tokenRequest = (config: Config): SubresourceHandler => ({
  group: "",
  plural: "serviceaccounts",
  subresource: "token",
  handle: (request, route, context) =>
    Effect.gen(function* () {
      if (request.method.toUpperCase() !== "POST") {
        return yield* Effect.fail(ApiError.of(Status.methodNotSupported("serviceaccounts/token", request.method.toLowerCase())))
      }
      const namespace = route.namespace ?? ""
      const name = route.name ?? ""
      const body = yield* eitherToEffect(Either.flatMap(Body.parse(request.body, request.headers["content-type"]), Body.asObject))
      if ((body["kind"] !== undefined && body["kind"] !== "TokenRequest") || (body["apiVersion"] !== undefined && body["apiVersion"] !== "authentication.k8s.io/v1")) {
        return yield* Effect.fail(ApiError.badRequest(`the body must be an authentication.k8s.io/v1 TokenRequest`))
      }
      const spec = asObject(body["spec"])
      const errors: Array<FieldError.FieldError> = []
      const audiences = spec["audiences"] ?? []
      if (!Array.isArray(audiences) || audiences.some((a) => typeof a !== "string" || a === "")) errors.push(FieldError.invalid("spec.audiences", audiences, "must be a list of non-empty strings"))
      const asked = spec["expirationSeconds"] ?? defaultExpirationSeconds
      if (typeof asked !== "number" || !Number.isInteger(asked)) errors.push(FieldError.invalid("spec.expirationSeconds", asked, "must be an integer"))
      else if (asked < minExpirationSeconds) errors.push(FieldError.invalid("spec.expirationSeconds", asked, "may not specify a duration less than 10 minutes"))
      const ref = spec["boundObjectRef"]
      const bound = ref === undefined || ref === null ? undefined : asObject(ref)
      if (bound !== undefined) {
        // Only pods are bindable here (Kubernetes also binds to Secrets and Nodes).
        if (bound["kind"] !== "Pod") errors.push(FieldError.notSupported("spec.boundObjectRef.kind", bound["kind"], ["Pod"]))
        if (bound["apiVersion"] !== undefined && bound["apiVersion"] !== "v1") errors.push(FieldError.notSupported("spec.boundObjectRef.apiVersion", bound["apiVersion"], ["v1"]))
        if (typeof bound["name"] !== "string" || bound["name"] === "") errors.push(FieldError.required("spec.boundObjectRef.name"))
        if (bound["uid"] !== undefined && typeof bound["uid"] !== "string") errors.push(FieldError.invalid("spec.boundObjectRef.uid", bound["uid"], "must be a string"))
      }
      if (errors.length > 0) return yield* Effect.fail(invalid(name, errors))
      const stored = yield* currentUid(context.store, namespace, name)
      if (Option.isNone(stored)) return yield* Effect.fail(ApiError.of(Status.notFound("serviceaccounts", name)))
      const pod = yield* boundPod(context.store, request.user, namespace, name, bound)
      const wantedAudiences = (audiences as ReadonlyArray<string>).length > 0 ? (audiences as ReadonlyArray<string>) : audiencesOf(config)
      const seconds = Math.min(asked as number, config.maxExpirationSeconds ?? defaultMaxExpirationSeconds)
      const now = yield* Clock.currentTimeMillis
      const issued = yield* sign(config, { namespace, name, uid: stored.value }, wantedAudiences, seconds, now, pod)
      const metadata = Objects.meta(body)
      return json(201, {
        kind: "TokenRequest",
        apiVersion: "authentication.k8s.io/v1",
        metadata: { ...metadata, name, namespace, creationTimestamp: Objects.timestamp(now) },
        spec: { ...spec, audiences: wantedAudiences, expirationSeconds: seconds, boundObjectRef: pod === undefined ? null : { kind: "Pod", apiVersion: "v1", name: pod.name, uid: pod.uid } },
        status: { token: issued.token, expirationTimestamp: Objects.timestamp(issued.expiresAt * 1000) }
      })
    })
})

/**
 * The pod a TokenRequest binds to, checked as kube-apiserver does: it exists with the given uid and
 * runs as this ServiceAccount; a node must bind, with a uid, to a pod bound to itself (NodeRestriction).
 */
const boundPod = (
  store: StoreService,
  user: UserInfo,
  namespace: string,
  account: string,
  ref: Record<string, unknown> | undefined
): Effect.Effect<BoundPod | undefined, ApiError.ApiError> =>
  Effect.gen(function* () {
    const node = nodeNameOf(user)
    const refuse = (detail: string) => Effect.fail(ApiError.of(Status.forbidden("serviceaccounts/token", account, detail)))
    if (ref === undefined) return node === undefined ? undefined : yield* refuse("node requested token not bound to a pod")
    const name = String(ref["name"])
    const uid = typeof ref["uid"] === "string" && ref["uid"] !== "" ? ref["uid"] : undefined
    if (node !== undefined && uid === undefined) return yield* refuse("node requested token with a pod binding without a uid")
    const pod = yield* storedPod(store, namespace, name)
    if (Option.isNone(pod)) return yield* Effect.fail(ApiError.of(Status.notFound("pods", name)))
    const m = Objects.meta(pod.value)
    const spec = asObject(pod.value["spec"])
    if (uid !== undefined && m["uid"] !== uid) {
      const detail = `the UID in the bound object reference (${uid}) does not match the UID in record. The object might have been deleted and then recreated`
      return yield* node !== undefined ? refuse(detail) : Effect.fail(ApiError.of(Status.conflict("serviceaccounts/token", account, detail)))
    }
    if (node !== undefined && spec["nodeName"] !== node) return yield* refuse("node requested token bound to a pod scheduled on a different node")
    const runsAs = typeof spec["serviceAccountName"] === "string" && spec["serviceAccountName"] !== "" ? spec["serviceAccountName"] : "default"
    if (runsAs !== account) return yield* Effect.fail(ApiError.badRequest(`cannot bind token for serviceaccount "${account}" to pod running with different serviceaccount name.`))
    return { name, uid: String(m["uid"] ?? "") }
  })

const eitherToEffect = <A>(e: Either.Either<A, ApiError.ApiError>): Effect.Effect<A, ApiError.ApiError> =>
  Either.isRight(e) ? Effect.succeed(e.right) : Effect.fail(e.left)
