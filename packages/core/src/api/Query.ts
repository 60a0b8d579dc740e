/**
 * Query parameters of the Kubernetes API, parsed and checked in one place: list and watch
 * options, write options (dryRun, fieldValidation) and delete options. A malformed value is a
 * 400 naming the parameter; integers are decimal digits no larger than JavaScript holds exactly
 * (2^53 - 1), except `limit`, which is clamped to `maxLimit`.
 */
import { Either } from "effect"
import * as ApiError from "./ApiError.js"

/** `fieldValidation`: what to do with fields the schema does not know. */
export type FieldValidation = "Ignore" | "Warn" | "Strict"

/** Options of create, update and patch. */
export interface WriteOptions {
  readonly dryRun: boolean
  readonly fieldValidation: FieldValidation
}

/** Options of list and watch. */
export interface ListOptions {
  readonly labelSelector: string
  readonly fieldSelector: string
  readonly limit: number
  readonly continue: string | undefined
  readonly resourceVersion: string
  readonly resourceVersionMatch: "" | "NotOlderThan" | "Exact"
  readonly watch: boolean
  readonly allowWatchBookmarks: boolean
  readonly timeoutSeconds: number | undefined
  readonly sendInitialEvents: boolean | undefined
}

/** Options of delete. */
export interface DeleteOptions {
  readonly dryRun: boolean
  readonly gracePeriodSeconds: number | undefined
  readonly propagationPolicy: "Background" | "Foreground" | "Orphan" | undefined
  readonly preconditions: { readonly uid?: string; readonly resourceVersion?: string }
}

/**
 * The largest `limit` a list honours; a larger one is served as this many items and a `continue`
 * token, which the API allows (a server may return fewer items than asked). Kubernetes passes any
 * int64 through to etcd; here a page is read into memory at once, so it is bounded, and numbers
 * past what SQLite and JavaScript hold exactly never reach the store.
 */
export const maxLimit = 10000

// Decimal digits only, as Go's strconv.ParseInt reads them (no exponent, fraction or sign).
const digits = /^[0-9]+$/

const notNonNegative = (name: string, v: string) =>
  ApiError.badRequest(`${name}: invalid value ${JSON.stringify(v)}: must be a non-negative integer`)

/** A non-negative integer parameter; one past 2^53 - 1 (not exact in JavaScript, nor an int64 past 2^63) is a 400. */
const int = (q: URLSearchParams, name: string): Either.Either<number | undefined, ApiError.ApiError> => {
  const v = q.get(name)
  if (v === null || v === "") return Either.right(undefined)
  if (!digits.test(v)) return Either.left(notNonNegative(name, v))
  const n = Number(v)
  return Number.isSafeInteger(n)
    ? Either.right(n)
    : Either.left(ApiError.badRequest(`${name}: invalid value ${JSON.stringify(v)}: must be at most ${Number.MAX_SAFE_INTEGER}`))
}

/** `limit`: a non-negative integer, clamped to `maxLimit` however large (never a 400 for size). */
const limit = (q: URLSearchParams): Either.Either<number, ApiError.ApiError> => {
  const v = q.get("limit")
  if (v === null || v === "") return Either.right(0)
  if (!digits.test(v)) return Either.left(notNonNegative("limit", v))
  // Compared as digits, so a number no double holds exactly is clamped too.
  const trimmed = v.replace(/^0+(?=.)/, "")
  return Either.right(trimmed.length > String(maxLimit).length ? maxLimit : Math.min(Number(trimmed), maxLimit))
}

const bool = (q: URLSearchParams, name: string): Either.Either<boolean | undefined, ApiError.ApiError> => {
  const v = q.get(name)
  if (v === null || v === "") return Either.right(undefined)
  if (v === "true" || v === "1") return Either.right(true)
  if (v === "false" || v === "0") return Either.right(false)
  return Either.left(ApiError.badRequest(`${name}: invalid value ${JSON.stringify(v)}: must be true or false`))
}

const dryRun = (q: URLSearchParams): Either.Either<boolean, ApiError.ApiError> => {
  const values = q.getAll("dryRun").filter((v) => v !== "")
  for (const v of values) if (v !== "All") return Either.left(ApiError.badRequest(`dryRun: Unsupported value: ${JSON.stringify(v)}: supported values: "All"`))
  return Either.right(values.length > 0)
}

/** Parse write options. */
export const write = (q: URLSearchParams): Either.Either<WriteOptions, ApiError.ApiError> =>
  Either.gen(function* () {
    const fv = q.get("fieldValidation") ?? ""
    const fieldValidation: FieldValidation =
      fv === "" ? "Warn" : fv === "Ignore" || fv === "Warn" || fv === "Strict" ? fv : yield* Either.left(ApiError.badRequest(`fieldValidation: Unsupported value: ${JSON.stringify(fv)}: supported values: "Ignore", "Warn", "Strict"`))
    return { dryRun: yield* dryRun(q), fieldValidation }
  })

/** Parse list and watch options. */
export const list = (q: URLSearchParams, watchPath: boolean): Either.Either<ListOptions, ApiError.ApiError> =>
  Either.gen(function* () {
    const rvm = q.get("resourceVersionMatch") ?? ""
    if (rvm !== "" && rvm !== "NotOlderThan" && rvm !== "Exact") {
      return yield* Either.left(ApiError.badRequest(`resourceVersionMatch: Unsupported value: ${JSON.stringify(rvm)}: supported values: "NotOlderThan", "Exact"`))
    }
    const resourceVersion = q.get("resourceVersion") ?? ""
    if (resourceVersion !== "" && !(digits.test(resourceVersion) && Number.isSafeInteger(Number(resourceVersion)))) {
      return yield* Either.left(ApiError.badRequest(`resourceVersion: Invalid value: ${JSON.stringify(resourceVersion)}: must be a number`))
    }
    if (rvm !== "" && resourceVersion === "") {
      return yield* Either.left(ApiError.badRequest("resourceVersionMatch is forbidden unless resourceVersion is provided"))
    }
    const continueToken = q.get("continue") ?? ""
    const watch = watchPath || ((yield* bool(q, "watch")) ?? false)
    return {
      labelSelector: q.get("labelSelector") ?? "",
      fieldSelector: q.get("fieldSelector") ?? "",
      limit: yield* limit(q),
      continue: continueToken === "" ? undefined : continueToken,
      resourceVersion,
      resourceVersionMatch: rvm,
      watch,
      allowWatchBookmarks: (yield* bool(q, "allowWatchBookmarks")) ?? false,
      timeoutSeconds: yield* int(q, "timeoutSeconds"),
      sendInitialEvents: yield* bool(q, "sendInitialEvents")
    }
  })

/** Parse delete options from the query and an optional DeleteOptions body (the body wins). */
export const remove = (q: URLSearchParams, body: Record<string, unknown> | undefined): Either.Either<DeleteOptions, ApiError.ApiError> =>
  Either.gen(function* () {
    const grace = body?.["gracePeriodSeconds"] ?? (yield* int(q, "gracePeriodSeconds"))
    // An int64 in Kubernetes; here one JavaScript holds exactly (1e300 is an "integer" to Number.isInteger).
    if (grace !== undefined && grace !== null && (typeof grace !== "number" || !Number.isSafeInteger(grace))) {
      return yield* Either.left(ApiError.badRequest(`gracePeriodSeconds: must be an integer between ${Number.MIN_SAFE_INTEGER} and ${Number.MAX_SAFE_INTEGER}`))
    }
    const policy = body?.["propagationPolicy"] ?? q.get("propagationPolicy") ?? undefined
    if (policy !== undefined && policy !== null && policy !== "Background" && policy !== "Foreground" && policy !== "Orphan") {
      return yield* Either.left(ApiError.badRequest(`propagationPolicy: Unsupported value: ${JSON.stringify(policy)}: supported values: "Foreground", "Background", "Orphan"`))
    }
    const orphan = body?.["orphanDependents"]
    const pre = (body?.["preconditions"] ?? {}) as { uid?: unknown; resourceVersion?: unknown }
    const bodyDryRun = Array.isArray(body?.["dryRun"]) && (body["dryRun"] as Array<unknown>).includes("All")
    return {
      dryRun: bodyDryRun || (yield* dryRun(q)),
      gracePeriodSeconds: typeof grace === "number" ? Math.max(0, grace) : undefined,
      propagationPolicy: (policy ?? (orphan === true ? "Orphan" : orphan === false ? "Background" : undefined)) as DeleteOptions["propagationPolicy"],
      preconditions: {
        ...(typeof pre.uid === "string" ? { uid: pre.uid } : {}),
        ...(typeof pre.resourceVersion === "string" ? { resourceVersion: pre.resourceVersion } : {})
      }
    }
  })
