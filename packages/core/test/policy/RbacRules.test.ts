// The RBAC evaluator, table-driven: rule matching (verbs, groups, resources with subresources,
// resourceNames, nonResourceURLs, wildcards), subjects (users, groups, ServiceAccounts), the
// scope of RoleBindings vs ClusterRoleBindings, aggregation, rules reviews, escalation coverage.
import { BootstrapPolicy, RbacRules as Rbac } from "@koder/fleet-core"
import { describe, expect, it } from "vitest"

type Req = Omit<Rbac.Request, "user">
const res = (verb: string, resource: string, o: Partial<Req> = {}): Req => ({
  verb,
  resourceRequest: true,
  apiGroup: "",
  resource,
  subresource: "",
  namespace: "",
  name: "",
  path: "",
  ...o
})
const path = (verb: string, p: string): Req => ({ verb, resourceRequest: false, apiGroup: "", resource: "", subresource: "", namespace: "", name: "", path: p })

describe("ruleAllows", () => {
  const cases: ReadonlyArray<[string, Rbac.Rule, Req, boolean]> = [
    ["exact verb and resource", { verbs: ["get"], apiGroups: [""], resources: ["pods"] }, res("get", "pods"), true],
    ["other verb", { verbs: ["get"], apiGroups: [""], resources: ["pods"] }, res("list", "pods"), false],
    ["verb *", { verbs: ["*"], apiGroups: [""], resources: ["pods"] }, res("delete", "pods"), true],
    ["other group", { verbs: ["get"], apiGroups: ["apps"], resources: ["pods"] }, res("get", "pods"), false],
    ["group *", { verbs: ["get"], apiGroups: ["*"], resources: ["deployments"] }, res("get", "deployments", { apiGroup: "apps" }), true],
    ["resource does not grant its subresource", { verbs: ["get"], apiGroups: [""], resources: ["pods"] }, res("get", "pods", { subresource: "log" }), false],
    ["subresource named", { verbs: ["get"], apiGroups: [""], resources: ["pods/log"] }, res("get", "pods", { subresource: "log" }), true],
    ["subresource does not grant the resource", { verbs: ["get"], apiGroups: [""], resources: ["pods/log"] }, res("get", "pods"), false],
    ["*/scale", { verbs: ["update"], apiGroups: ["apps"], resources: ["*/scale"] }, res("update", "deployments", { apiGroup: "apps", subresource: "scale" }), true],
    ["*/scale not the resource", { verbs: ["update"], apiGroups: ["apps"], resources: ["*/scale"] }, res("update", "deployments", { apiGroup: "apps" }), false],
    ["resource * includes subresources", { verbs: ["create"], apiGroups: [""], resources: ["*"] }, res("create", "pods", { subresource: "exec" }), true],
    ["update does not grant exec", { verbs: ["update", "patch"], apiGroups: [""], resources: ["pods"] }, res("exec", "pods", { name: "p" }), false],
    ["exec named", { verbs: ["exec", "signal"], apiGroups: [""], resources: ["pods"] }, res("signal", "pods", { name: "p" }), true],
    ["resourceNames match", { verbs: ["get"], apiGroups: [""], resources: ["configmaps"], resourceNames: ["a"] }, res("get", "configmaps", { name: "a" }), true],
    ["resourceNames other", { verbs: ["get"], apiGroups: [""], resources: ["configmaps"], resourceNames: ["a"] }, res("get", "configmaps", { name: "b" }), false],
    ["resourceNames never match a list", { verbs: ["list"], apiGroups: [""], resources: ["configmaps"], resourceNames: ["a"] }, res("list", "configmaps"), false],
    ["non-resource exact", { verbs: ["get"], nonResourceURLs: ["/version"] }, path("get", "/version"), true],
    ["non-resource prefix *", { verbs: ["get"], nonResourceURLs: ["/apis/*"] }, path("get", "/apis/apps/v1"), true],
    ["non-resource prefix is not the root", { verbs: ["get"], nonResourceURLs: ["/apis/*"] }, path("get", "/apis"), false],
    ["non-resource *", { verbs: ["*"], nonResourceURLs: ["*"] }, path("post", "/anything"), true],
    ["non-resource verb", { verbs: ["get"], nonResourceURLs: ["/version"] }, path("post", "/version"), false],
    ["resource rule never matches a path", { verbs: ["*"], apiGroups: ["*"], resources: ["*"] }, path("get", "/version"), false],
    ["URL rule never matches a resource", { verbs: ["*"], nonResourceURLs: ["*"] }, res("get", "pods"), false]
  ]
  it.each(cases)("%s", (_name, rule, request, expected) => {
    expect(Rbac.ruleAllows(rule, request)).toBe(expected)
  })
})

const role = (kind: "Role" | "ClusterRole", name: string, rules: ReadonlyArray<Rbac.Rule>, namespace = "", labels: Record<string, string> = {}): Rbac.RoleObject => ({
  kind,
  name,
  namespace,
  labels,
  rules
})
const binding = (kind: "RoleBinding" | "ClusterRoleBinding", name: string, roleRef: { kind: string; name: string }, subjects: ReadonlyArray<Rbac.Subject>, namespace = ""): Rbac.BindingObject => ({
  kind,
  name,
  namespace,
  roleRef,
  subjects
})

const podReader: Rbac.Rule = { verbs: ["get", "list"], apiGroups: [""], resources: ["pods"] }
const policy = Rbac.make(
  [
    role("ClusterRole", "pod-reader", [podReader]),
    role("Role", "cm-writer", [{ verbs: ["create", "update"], apiGroups: [""], resources: ["configmaps"] }], "team-a"),
    role("Role", "elsewhere", [{ verbs: ["*"], apiGroups: ["*"], resources: ["*"] }], "team-b")
  ],
  [
    binding("ClusterRoleBinding", "readers", { kind: "ClusterRole", name: "pod-reader" }, [{ kind: "Group", name: "readers" }]),
    binding("RoleBinding", "alice-pods", { kind: "ClusterRole", name: "pod-reader" }, [{ kind: "User", name: "alice" }], "team-a"),
    binding("RoleBinding", "alice-cm", { kind: "Role", name: "cm-writer" }, [{ kind: "User", name: "alice" }], "team-a"),
    // A RoleBinding cannot reference a Role of another namespace: this one points at team-a's own (missing) "elsewhere".
    binding("RoleBinding", "cross", { kind: "Role", name: "elsewhere" }, [{ kind: "User", name: "alice" }], "team-a"),
    binding("RoleBinding", "sa", { kind: "ClusterRole", name: "pod-reader" }, [{ kind: "ServiceAccount", name: "builder" }], "team-a"),
    binding("RoleBinding", "sa-other", { kind: "ClusterRole", name: "pod-reader" }, [{ kind: "ServiceAccount", name: "deployer", namespace: "ci" }], "team-b"),
    binding("ClusterRoleBinding", "crb-to-role", { kind: "Role", name: "cm-writer" }, [{ kind: "User", name: "mallory" }]),
    binding("ClusterRoleBinding", "all-sas", { kind: "ClusterRole", name: "pod-reader" }, [{ kind: "Group", name: "system:serviceaccounts:ci" }])
  ]
)

describe("authorize", () => {
  const user = (name: string, groups: ReadonlyArray<string> = []) => ({ name, groups })
  const cases: ReadonlyArray<[string, Rbac.User, Req, boolean]> = [
    ["default deny", user("nobody"), res("get", "pods", { namespace: "team-a" }), false],
    ["masters", user("root", ["system:masters"]), res("delete", "nodes", { name: "n1" }), true],
    ["group ClusterRoleBinding, any namespace", user("bob", ["readers"]), res("list", "pods", { namespace: "x" }), true],
    ["group ClusterRoleBinding, cluster-wide", user("bob", ["readers"]), res("list", "pods"), true],
    ["RoleBinding of a ClusterRole: in its namespace", user("alice"), res("get", "pods", { namespace: "team-a" }), true],
    ["RoleBinding of a ClusterRole: not elsewhere", user("alice"), res("get", "pods", { namespace: "team-b" }), false],
    ["RoleBinding: not cluster-wide", user("alice"), res("list", "pods"), false],
    ["RoleBinding of a Role", user("alice"), res("create", "configmaps", { namespace: "team-a" }), true],
    ["RoleBinding of a Role, other verb", user("alice"), res("delete", "configmaps", { namespace: "team-a" }), false],
    ["RoleBinding cannot reach another namespace's Role", user("alice"), res("delete", "secrets", { namespace: "team-a" }), false],
    ["ServiceAccount defaults to the binding's namespace", user("system:serviceaccount:team-a:builder"), res("get", "pods", { namespace: "team-a" }), true],
    ["ServiceAccount of another namespace", user("system:serviceaccount:team-b:builder"), res("get", "pods", { namespace: "team-a" }), false],
    ["ServiceAccount with explicit namespace", user("system:serviceaccount:ci:deployer"), res("get", "pods", { namespace: "team-b" }), true],
    ["ClusterRoleBinding to a Role grants nothing", user("mallory"), res("create", "configmaps", { namespace: "team-a" }), false],
    ["ServiceAccount group", user("system:serviceaccount:ci:x", ["system:serviceaccounts", "system:serviceaccounts:ci"]), res("list", "pods"), true]
  ]
  it.each(cases)("%s", (_name, u, request, expected) => {
    expect(Rbac.authorize(policy, { ...request, user: u }).allowed).toBe(expected)
  })

  it("explains an allow as Kubernetes does", () => {
    expect(Rbac.authorize(policy, { ...res("get", "pods", { namespace: "team-a" }), user: user("alice") }).reason).toBe(
      'RBAC: allowed by RoleBinding "alice-pods/team-a" of ClusterRole "pod-reader" to User "alice"'
    )
    expect(Rbac.authorize(policy, { ...res("get", "pods"), user: user("bob", ["readers"]) }).reason).toBe(
      'RBAC: allowed by ClusterRoleBinding "readers" of ClusterRole "pod-reader" to Group "readers"'
    )
  })

  it("lists the namespaces a user reaches and the rules it holds", () => {
    expect(Rbac.namespacesFor(policy, user("alice"))).toEqual({ all: false, namespaces: ["team-a"] })
    expect(Rbac.namespacesFor(policy, user("root", ["system:masters"])).all).toBe(true)
    const set = Rbac.rulesFor(policy, user("alice"), "team-a")
    expect(set.rules).toContainEqual(podReader)
    expect(set.missing).toEqual(["Role/team-a/elsewhere"])
  })
})

describe("aggregation", () => {
  it("collects labelled ClusterRoles, transitively, without duplicates", () => {
    const agg = (name: string, label: string, labels: Record<string, string> = {}): Rbac.RoleObject => ({
      ...role("ClusterRole", name, [], "", labels),
      aggregationRule: { clusterRoleSelectors: [{ matchLabels: { [label]: "true" } }] }
    })
    const r1: Rbac.Rule = { verbs: ["get"], apiGroups: [""], resources: ["pods"] }
    const r2: Rbac.Rule = { verbs: ["create"], apiGroups: [""], resources: ["pods"] }
    const out = Rbac.aggregate([
      agg("top", "to-top"),
      agg("mid", "to-mid", { "to-top": "true" }),
      role("ClusterRole", "a", [r1], "", { "to-mid": "true" }),
      role("ClusterRole", "b", [r1, r2], "", { "to-top": "true" })
    ])
    expect(out.get("mid")).toEqual([r1])
    expect(out.get("top")).toEqual([r1, r2])
  })

  it("builds admin ⊇ edit ⊇ view and the Fleet profiles from the bootstrap policy", () => {
    const roles = BootstrapPolicy.clusterRoles.map((o) => Rbac.roleFromJson(o)!)
    const p = Rbac.make(roles, [])
    const rules = (n: string) => p.roles.get(`ClusterRole/${n}`) ?? []
    const may = (roleName: string, r: Req) => rules(roleName).some((x) => Rbac.ruleAllows(x, r))
    expect(may("view", res("list", "pods"))).toBe(true)
    expect(may("view", res("get", "secrets"))).toBe(false)
    expect(may("edit", res("get", "secrets"))).toBe(true)
    expect(may("edit", res("create", "rolebindings", { apiGroup: "rbac.authorization.k8s.io" }))).toBe(false)
    expect(may("admin", res("create", "rolebindings", { apiGroup: "rbac.authorization.k8s.io" }))).toBe(true)
    expect(may("admin", res("list", "pods"))).toBe(true)
    expect(may("fleet:customer", res("exec", "pods", { name: "p" }))).toBe(true)
    expect(may("fleet:customer", res("update", "resourcequotas", { name: "q" }))).toBe(false)
    expect(may("fleet:collaborator", res("get", "secrets"))).toBe(false)
    expect(may("fleet:collaborator", res("list", "nodes"))).toBe(true)
    expect(may("fleet:collaborator", res("update", "deployments", { apiGroup: "apps", subresource: "scale" }))).toBe(true)
    expect(may("fleet:collaborator", res("create", "pods", { subresource: "exec" }))).toBe(false)
  })
})

describe("escalation coverage", () => {
  const cases: ReadonlyArray<[string, ReadonlyArray<Rbac.Rule>, ReadonlyArray<Rbac.Rule>, number]> = [
    ["same rule", [podReader], [podReader], 0],
    ["subset", [podReader], [{ verbs: ["get"], apiGroups: [""], resources: ["pods"] }], 0],
    ["more verbs", [podReader], [{ verbs: ["get", "delete"], apiGroups: [""], resources: ["pods"] }], 1],
    ["wildcards cover", [{ verbs: ["*"], apiGroups: ["*"], resources: ["*"] }], [{ verbs: ["get"], apiGroups: ["apps"], resources: ["deployments/scale"] }], 0],
    ["a resource does not cover *", [podReader], [{ verbs: ["get"], apiGroups: [""], resources: ["*"] }], 1],
    ["*/scale covers x/scale", [{ verbs: ["get"], apiGroups: ["apps"], resources: ["*/scale"] }], [{ verbs: ["get"], apiGroups: ["apps"], resources: ["deployments/scale"] }], 0],
    ["names cover names", [{ ...podReader, resourceNames: ["a"] }], [{ verbs: ["get"], apiGroups: [""], resources: ["pods"], resourceNames: ["a"] }], 0],
    ["names do not cover all", [{ ...podReader, resourceNames: ["a"] }], [{ verbs: ["get"], apiGroups: [""], resources: ["pods"] }], 1],
    ["URL prefix", [{ verbs: ["get"], nonResourceURLs: ["/apis/*"] }], [{ verbs: ["get"], nonResourceURLs: ["/apis/apps"] }], 0]
  ]
  it.each(cases)("%s", (_name, owner, servant, uncovered) => {
    expect(Rbac.uncovered(owner, servant)).toHaveLength(uncovered)
  })
})
