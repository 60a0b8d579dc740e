/**
 * Impersonation, as kube-apiserver's `WithImpersonation` filter: a caller allowed the
 * `impersonate` verb sends `Impersonate-User` (and optionally `Impersonate-Group`, repeated,
 * `Impersonate-Uid`, `Impersonate-Extra-<key>`), and the rest of the request (authorization,
 * flow control, admission, the handler) runs as that user. Every requested attribute is
 * authorized separately, as the authenticated caller, before the switch:
 *
 *   headers ─▶ parse ─▶ checks (one per user, group, extra value, uid) ─▶ authorize each ─▶ impersonated user
 *
 * What is authorized (kube's attributes): `users`/`groups` in the core group, `serviceaccounts` in
 * the account's namespace when the user is `system:serviceaccount:NS:NAME`, `uids` and
 * `userextras/<key>` in `authentication.k8s.io`; the name is the requested value. Headers are never
 * ignored: groups, a uid or extras without a user, an empty extra key and any other
 * `Impersonate-*` header are a 400 (kube-apiserver answers the first with a 500 and ignores the others).
 */
import { Effect, Either, Option } from "effect"
import { isDNS1123Label, isDNS1123Subdomain } from "../model/Validation.js"
import * as ApiError from "./ApiError.js"
import * as Authz from "./Authz.js"
import type { UserInfo } from "./Http.js"

/** The header naming the user to act as. */
export const UserHeader = "impersonate-user"
/** A group to act as (repeatable). */
export const GroupHeader = "impersonate-group"
/** The uid to act as. */
export const UidHeader = "impersonate-uid"
/** The prefix of the headers carrying `extra` values; the rest of the name is the URL-encoded key. */
export const ExtraHeaderPrefix = "impersonate-extra-"

/**
 * How the HTTP layer keeps a repeated impersonation header's values apart in `ApiRequest.headers`
 * (a group name may hold ", ", the separator of other repeated headers; no header value holds a newline).
 */
export const valueSeparator = "\n"

const anonymous = "system:anonymous"
const authenticatedGroup = "system:authenticated"
const unauthenticatedGroup = "system:unauthenticated"
const serviceAccountPrefix = "system:serviceaccount:"

/** What the headers ask to act as. */
export interface Requested {
  readonly user: string
  /** Set when `Impersonate-Uid` was sent. */
  readonly uid: string | undefined
  /** Set when `Impersonate-Group` was sent: then these are all the groups (plus `system:authenticated`). */
  readonly groups: ReadonlyArray<string> | undefined
  /** Decoded keys (lower case) and their values, in the order sent. */
  readonly extra: ReadonlyArray<readonly [string, ReadonlyArray<string>]>
}

const values = (header: string | undefined): ReadonlyArray<string> => (header === undefined ? [] : header.split(valueSeparator))

// kube's unescapeExtraKey: a key that is not valid %-encoding is kept as sent.
const decodeKey = (encoded: string): string => {
  try {
    return decodeURIComponent(encoded)
  } catch {
    return encoded
  }
}

const headerName = (name: string) => name.replace(/(^|-)([a-z])/g, (_, dash: string, c: string) => `${dash}${c.toUpperCase()}`)

/**
 * Read the impersonation headers (names in lower case, repeated values joined with
 * `valueSeparator`): none → `None`; a request → `Some`; a malformed one → 400.
 */
export const parse = (headers: Readonly<Record<string, string | undefined>>): Either.Either<Option.Option<Requested>, ApiError.ApiError> => {
  let found = false
  const extra: Array<readonly [string, ReadonlyArray<string>]> = []
  for (const name in headers) {
    if (!name.startsWith("impersonate-") || headers[name] === undefined) continue
    found = true
    if (name === UserHeader || name === GroupHeader || name === UidHeader) continue
    if (!name.startsWith(ExtraHeaderPrefix)) return Either.left(ApiError.badRequest(`unknown impersonation header ${JSON.stringify(headerName(name))}`))
    const encoded = name.slice(ExtraHeaderPrefix.length)
    if (encoded === "") return Either.left(ApiError.badRequest("Impersonate-Extra-: the extra key must not be empty"))
    const key = decodeKey(encoded)
    const previous = extra.findIndex(([k]) => k === key)
    // Two encodings of one key (`a%2Fb`, `a%2fb`) add to the same key, as kube's map does.
    if (previous >= 0) extra[previous] = [key, [...extra[previous]![1], ...values(headers[name])]]
    else extra.push([key, values(headers[name])])
  }
  if (!found) return Either.right(Option.none())
  // A repeated Impersonate-User or -Uid counts by its first value, as Go's Header.Get.
  const user = values(headers[UserHeader])[0] ?? ""
  const uid = headers[UidHeader] === undefined ? undefined : values(headers[UidHeader])[0]!
  const groups = headers[GroupHeader] === undefined ? undefined : values(headers[GroupHeader])
  if (user === "") {
    const sent = [...(groups === undefined ? [] : ["Impersonate-Group"]), ...(uid === undefined ? [] : ["Impersonate-Uid"]), ...extra.map(([k]) => `Impersonate-Extra-${k}`)]
    return Either.left(
      ApiError.badRequest(sent.length === 0 ? "Impersonate-User: the user name must not be empty" : `requested ${sent.join(", ")} without impersonating a user: Impersonate-User is required`)
    )
  }
  return Either.right(Option.some({ user, uid, groups, extra }))
}

/** The namespace and name of a ServiceAccount user name (kube's `serviceaccount.SplitUsername`), if it is one. */
export const serviceAccountOf = (user: string): { readonly namespace: string; readonly name: string } | undefined => {
  if (!user.startsWith(serviceAccountPrefix)) return undefined
  const parts = user.slice(serviceAccountPrefix.length).split(":")
  if (parts.length !== 2) return undefined
  const [namespace, name] = parts as [string, string]
  return isDNS1123Label(namespace).length === 0 && isDNS1123Subdomain(name).length === 0 ? { namespace, name } : undefined
}

/** The authorization checks a request needs, in kube's order: the user, each group, each extra value, the uid. */
export const checks = (requested: Requested, caller: UserInfo): ReadonlyArray<Authz.Attributes> => {
  const check = (apiGroup: string, resource: string, name: string, more: { subresource?: string; namespace?: string } = {}): Authz.Attributes => ({
    user: caller,
    verb: "impersonate",
    resourceRequest: true,
    apiGroup,
    apiVersion: "v1",
    resource,
    subresource: more.subresource ?? "",
    namespace: more.namespace ?? "",
    name,
    path: ""
  })
  const account = serviceAccountOf(requested.user)
  return [
    account === undefined ? check("", "users", requested.user) : check("", "serviceaccounts", account.name, { namespace: account.namespace }),
    ...(requested.groups ?? []).map((g) => check("", "groups", g)),
    ...requested.extra.flatMap(([key, vs]) => vs.map((v) => check("authentication.k8s.io", "userextras", v, { subresource: key }))),
    ...(requested.uid === undefined ? [] : [check("authentication.k8s.io", "uids", requested.uid)])
  ]
}

/**
 * The user a request acts as once every check passed: the requested groups, or a ServiceAccount's
 * own; `system:authenticated` added (`system:unauthenticated` for `system:anonymous`) unless given.
 */
export const userOf = (requested: Requested): UserInfo => {
  const account = serviceAccountOf(requested.user)
  const groups = [...(requested.groups ?? (account === undefined ? [] : ["system:serviceaccounts", `system:serviceaccounts:${account.namespace}`]))]
  if (requested.user === anonymous) {
    if (!groups.includes(unauthenticatedGroup)) groups.push(unauthenticatedGroup)
  } else if (!groups.includes(authenticatedGroup) && !groups.includes(unauthenticatedGroup)) {
    groups.push(authenticatedGroup)
  }
  return {
    name: requested.user,
    uid: requested.uid ?? "",
    groups,
    ...(requested.extra.length === 0 ? {} : { extra: Object.fromEntries(requested.extra) })
  }
}

/**
 * Who the request acts as: `caller` itself when no impersonation header was sent, else the
 * impersonated user once `authorize` allowed every requested attribute (403 naming the first
 * refused one; 400 for malformed headers).
 */
export const impersonate = (
  headers: Readonly<Record<string, string | undefined>>,
  caller: UserInfo,
  authorize: Authz.Authorizer
): Effect.Effect<UserInfo, ApiError.ApiError> => {
  const parsed = parse(headers)
  if (Either.isLeft(parsed)) return Effect.fail(parsed.left)
  // Every request comes through here: no header, no work beyond the scan.
  if (Option.isNone(parsed.right)) return Effect.succeed(caller)
  const requested = parsed.right.value
  const allowed = (attributes: Authz.Attributes) =>
    Effect.flatMap(authorize(attributes), (decision) => (decision.allowed ? Effect.void : Effect.fail(Authz.forbidden(attributes, decision.reason))))
  return Effect.as(Effect.forEach(checks(requested, caller), allowed, { discard: true }), userOf(requested))
}
