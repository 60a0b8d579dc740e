// Impersonation's decisions, table-driven: which headers ask for what (and which are a 400), what
// each request is authorized as, the user it becomes, and the Effect that refuses with a 403
// naming the first attribute the caller may not impersonate.
import { BootstrapPolicy, Impersonation, RbacRules, type ApiError, type Authz } from "@koder/fleet-core"
import { Effect, Either, Exit, Option } from "effect"
import { describe, expect, it } from "vitest"

const alice = { name: "alice", uid: "a-1", groups: ["devs", "system:authenticated"] }

describe("Impersonation.parse", () => {
  const ok: ReadonlyArray<[string, Record<string, string>, Impersonation.Requested | undefined]> = [
    ["no impersonation header", { authorization: "Bearer x", "x-impersonate-user": "bob" }, undefined],
    ["a user", { "impersonate-user": "bob" }, { user: "bob", uid: undefined, groups: undefined, extra: [] }],
    ["a user and groups, one per line", { "impersonate-user": "bob", "impersonate-group": "ops\nsystem:masters" }, { user: "bob", uid: undefined, groups: ["ops", "system:masters"], extra: [] }],
    ["a group name holding a comma stays one group", { "impersonate-user": "bob", "impersonate-group": "cn=a, ou=b" }, { user: "bob", uid: undefined, groups: ["cn=a, ou=b"], extra: [] }],
    ["a uid", { "impersonate-user": "bob", "impersonate-uid": "u-9" }, { user: "bob", uid: "u-9", groups: undefined, extra: [] }],
    [
      "extras: URL-decoded key, repeated values, two encodings of one key merged",
      { "impersonate-user": "bob", "impersonate-extra-acme.com%2fproject": "p1\np2", "impersonate-extra-acme.com%2Fproject": "p3", "impersonate-extra-scopes": "openid" },
      { user: "bob", uid: undefined, groups: undefined, extra: [["acme.com/project", ["p1", "p2", "p3"]], ["scopes", ["openid"]]] }
    ],
    ["a malformed %-encoding is kept as sent", { "impersonate-user": "bob", "impersonate-extra-a%zz": "v" }, { user: "bob", uid: undefined, groups: undefined, extra: [["a%zz", ["v"]]] }],
    ["a repeated user counts by its first value", { "impersonate-user": "bob\nmallory" }, { user: "bob", uid: undefined, groups: undefined, extra: [] }]
  ]
  it.each(ok)("%s", (_, headers, expected) => {
    const parsed = Impersonation.parse(headers)
    expect(Either.isRight(parsed)).toBe(true)
    const got = Either.getOrThrow(parsed)
    expect(Option.getOrUndefined(got)).toEqual(expected)
  })

  const bad: ReadonlyArray<[string, Record<string, string>, RegExp]> = [
    ["groups without a user", { "impersonate-group": "system:masters" }, /requested Impersonate-Group without impersonating a user/],
    ["a uid without a user", { "impersonate-uid": "u" }, /requested Impersonate-Uid without impersonating a user/],
    ["an extra without a user", { "impersonate-extra-scopes": "x" }, /requested Impersonate-Extra-scopes without impersonating a user/],
    ["an empty user", { "impersonate-user": "" }, /Impersonate-User: the user name must not be empty/],
    ["an empty user with groups", { "impersonate-user": "", "impersonate-group": "g" }, /without impersonating a user/],
    ["an empty extra key", { "impersonate-user": "bob", "impersonate-extra-": "x" }, /extra key must not be empty/],
    ["an unknown impersonation header (never ignored)", { "impersonate-users": "bob" }, /unknown impersonation header "Impersonate-Users"/]
  ]
  it.each(bad)("400 for %s", (_, headers, message) => {
    const parsed = Impersonation.parse(headers)
    expect(Either.isLeft(parsed)).toBe(true)
    const e = Either.flip(parsed).pipe(Either.getOrThrow)
    expect(e.status.code).toBe(400)
    expect(e.status.reason).toBe("BadRequest")
    expect(e.status.message).toMatch(message)
  })
})

describe("Impersonation.serviceAccountOf (kube's SplitUsername)", () => {
  it.each([
    ["system:serviceaccount:shop:builder", { namespace: "shop", name: "builder" }],
    ["system:serviceaccount:shop:a.b", { namespace: "shop", name: "a.b" }],
    ["system:serviceaccount:shop", undefined],
    ["system:serviceaccount:shop:a:b", undefined],
    ["system:serviceaccount:Shop:builder", undefined],
    ["system:serviceaccount::builder", undefined],
    ["system:serviceaccounts:shop", undefined],
    ["bob", undefined]
  ] as const)("%s", (user, expected) => expect(Impersonation.serviceAccountOf(user)).toEqual(expected))
})

const requested = (r: Partial<Impersonation.Requested> & { user: string }): Impersonation.Requested => ({ uid: undefined, groups: undefined, extra: [], ...r })
const brief = (a: Authz.Attributes) => [a.apiGroup, a.resource, a.subresource, a.namespace, a.name].join("|")

describe("Impersonation.checks", () => {
  it.each<[string, Impersonation.Requested, ReadonlyArray<string>]>([
    ["a user: users in the core group, by name", requested({ user: "nobody" }), ["|users|||nobody"]],
    ["a ServiceAccount: serviceaccounts in its namespace", requested({ user: "system:serviceaccount:shop:builder" }), ["|serviceaccounts||shop|builder"]],
    [
      "user, each group, each extra value, the uid, in kube's order",
      requested({ user: "bob", groups: ["g1", "g2"], extra: [["scopes", ["a", "b"]]], uid: "u-1" }),
      ["|users|||bob", "|groups|||g1", "|groups|||g2", "authentication.k8s.io|userextras|scopes||a", "authentication.k8s.io|userextras|scopes||b", "authentication.k8s.io|uids|||u-1"]
    ]
  ])("%s", (_, r, expected) => {
    const checks = Impersonation.checks(r, alice)
    expect(checks.map(brief)).toEqual(expected)
    for (const c of checks) {
      expect(c.verb).toBe("impersonate")
      expect(c.resourceRequest).toBe(true)
      expect(c.user).toBe(alice)
    }
  })
})

describe("Impersonation.userOf", () => {
  it.each<[string, Impersonation.Requested, { name: string; uid: string; groups: ReadonlyArray<string>; extra?: Record<string, ReadonlyArray<string>> }]>([
    ["a user gets system:authenticated, no uid", requested({ user: "nobody" }), { name: "nobody", uid: "", groups: ["system:authenticated"] }],
    ["given groups, system:authenticated added", requested({ user: "bob", groups: ["ops"] }), { name: "bob", uid: "", groups: ["ops", "system:authenticated"] }],
    ["system:unauthenticated given: not authenticated", requested({ user: "bob", groups: ["system:unauthenticated"] }), { name: "bob", uid: "", groups: ["system:unauthenticated"] }],
    ["system:authenticated given: not twice", requested({ user: "bob", groups: ["system:authenticated"] }), { name: "bob", uid: "", groups: ["system:authenticated"] }],
    ["anonymous gets system:unauthenticated", requested({ user: "system:anonymous" }), { name: "system:anonymous", uid: "", groups: ["system:unauthenticated"] }],
    [
      "a ServiceAccount gets its groups",
      requested({ user: "system:serviceaccount:shop:builder" }),
      { name: "system:serviceaccount:shop:builder", uid: "", groups: ["system:serviceaccounts", "system:serviceaccounts:shop", "system:authenticated"] }
    ],
    [
      "a ServiceAccount with given groups gets only those",
      requested({ user: "system:serviceaccount:shop:builder", groups: ["ops"] }),
      { name: "system:serviceaccount:shop:builder", uid: "", groups: ["ops", "system:authenticated"] }
    ],
    ["uid and extras", requested({ user: "bob", uid: "u-1", extra: [["scopes", ["openid"]]] }), { name: "bob", uid: "u-1", groups: ["system:authenticated"], extra: { scopes: ["openid"] } }]
  ])("%s", (_, r, expected) => expect(Impersonation.userOf(r)).toEqual(expected))
})

describe("Impersonation.impersonate", () => {
  // alice may impersonate the user "nobody" and the group "ops", nothing else.
  const asked: Array<string> = []
  const authorize: Authz.Authorizer = (a) =>
    Effect.sync(() => {
      asked.push(brief(a))
      return { allowed: a.user.name === "alice" && ((a.resource === "users" && a.name === "nobody") || (a.resource === "groups" && a.name === "ops")), reason: "" }
    })
  const run = (headers: Record<string, string>) => Effect.runSyncExit(Impersonation.impersonate(headers, alice, authorize))
  const failure = (exit: Exit.Exit<unknown, ApiError.ApiError>) => {
    if (Exit.isSuccess(exit) || exit.cause._tag !== "Fail") throw new Error(`expected a failure, got ${JSON.stringify(exit)}`)
    return exit.cause.error.status
  }

  it("without headers the caller itself, nothing authorized", () => {
    asked.length = 0
    const exit = run({ authorization: "Bearer t" })
    expect(Exit.isSuccess(exit) && exit.value).toBe(alice)
    expect(asked).toEqual([])
  })

  it("an allowed user and group: the impersonated user", () => {
    const exit = run({ "impersonate-user": "nobody", "impersonate-group": "ops" })
    expect(Exit.isSuccess(exit) && exit.value).toEqual({ name: "nobody", uid: "", groups: ["ops", "system:authenticated"] })
  })

  it("another user: 403 naming the user, the caller and the verb", () => {
    const status = failure(run({ "impersonate-user": "root" }))
    expect(status.code).toBe(403)
    expect(status.message).toBe('users "root" is forbidden: User "alice" cannot impersonate resource "users" in API group "" at the cluster scope')
  })

  it("an allowed user with a refused group: 403 naming the group, and nothing authorized after it", () => {
    asked.length = 0
    const status = failure(run({ "impersonate-user": "nobody", "impersonate-group": "system:masters\nops" }))
    expect(status.message).toBe('groups "system:masters" is forbidden: User "alice" cannot impersonate resource "groups" in API group "" at the cluster scope')
    expect(asked).toEqual(["|users|||nobody", "|groups|||system:masters"])
  })

  it("a refused extra names its key as the subresource; a ServiceAccount its namespace", () => {
    expect(failure(run({ "impersonate-user": "nobody", "impersonate-extra-scopes": "admin" })).message).toBe(
      // Authz.forbidden names the subresource in the resource, as it does for every 403.
      'userextras/scopes.authentication.k8s.io "admin" is forbidden: User "alice" cannot impersonate resource "userextras/scopes" in API group "authentication.k8s.io" at the cluster scope'
    )
    expect(failure(run({ "impersonate-user": "system:serviceaccount:kube-system:root" })).message).toBe(
      'serviceaccounts "root" is forbidden: User "alice" cannot impersonate resource "serviceaccounts" in API group "" in the namespace "kube-system"'
    )
  })

  it("malformed headers: 400 before anything is authorized", () => {
    asked.length = 0
    expect(failure(run({ "impersonate-group": "ops" })).code).toBe(400)
    expect(asked).toEqual([])
  })
})

describe("the built-in roles and the impersonate verb", () => {
  // Kubernetes' own policy: only cluster-admin (`*`) impersonates users, groups, uids and extras;
  // edit (so admin, and fleet:customer, which aggregates admin) may impersonate the
  // ServiceAccounts of the namespaces it is bound in, as kube's system:aggregate-to-edit does:
  // no more than edit already reaches by creating their tokens (serviceaccounts/token).
  const roles = BootstrapPolicy.clusterRoles.map((o) => RbacRules.roleFromJson(o)!)
  const aggregated = RbacRules.aggregate(roles)
  const impersonating = (name: string) =>
    (aggregated.get(name) ?? roles.find((r) => r.name === name)!.rules).filter((r) => r.verbs.includes("impersonate") || r.verbs.includes("*")).map((r) => ({ apiGroups: r.apiGroups, resources: r.resources }))
  const serviceAccounts = [{ apiGroups: [""], resources: ["serviceaccounts"] }]

  it.each([
    ["cluster-admin", [{ apiGroups: ["*"], resources: ["*"] }, { apiGroups: undefined, resources: undefined }]],
    ["admin", serviceAccounts],
    ["edit", serviceAccounts],
    ["fleet:customer", serviceAccounts],
    ["view", []],
    ["fleet:collaborator", []],
    ["system:basic-user", []],
    ["system:node", []],
    ["system:node-bootstrapper", []]
  ] as const)("%s", (name, expected) => expect(impersonating(name)).toEqual(expected))
})
