/**
 * The server's in-process control plane: the controllers and the scheduler, talking to the API
 * handler through a loopback client (no socket; every write still passes authentication,
 * authorization, admission and validation). The loopback token is random per process and lives
 * only in memory, like kube-apiserver's loopback client. With a PostgreSQL store several servers
 * may share one database: the controllers then run only in the one that holds the
 * `kube-system/fleet-controller-manager` lease.
 *
 *   api.handle ◀── InProcess.transport ◀── Client(loopback token) ◀── ControllerManager(elect?) ─▶ reconcilers
 */
import { ApiClient, Authn, Client, type Controller, ControllerManager, Controllers, type Http, InProcess, LeaderElection, type Placement, Scheduler, Storage, Store } from "@koder/fleet-core"
import { Effect, Schedule, type Scope } from "effect"
import { randomBytes } from "node:crypto"
import { hostname } from "node:os"

/** Who the controllers act as: kube-controller-manager's identity, with cluster-admin power. */
export const controllerUser: Http.UserInfo = {
  name: "system:kube-controller-manager",
  uid: "kube-controller-manager",
  groups: ["system:masters", "system:authenticated"]
}

/** How the control plane is set up. */
export interface Options {
  readonly store: Store.StoreService
  /** Whether several servers may share the store (PostgreSQL): elect a leader. */
  readonly elect: boolean
  /** Reconciler names to leave out (`scheduler` is one). */
  readonly disabled: ReadonlyArray<string>
  /** Controller options (timings, ranges). */
  readonly controllers?: Omit<Controllers.Options, "disabled">
  /** Reconcilers beyond the built-in set (the hub's federation controllers). */
  readonly extra?: ReadonlyArray<Controller.Reconciler>
  /** What else runs only while this server leads, stopped when it stops leading (the hub's Push members). */
  readonly leading?: Effect.Effect<void, never, Scope.Scope>
}

/** The identity of a node's agent (what a node credential authenticates as). */
export const nodeUser = (node: string): Http.UserInfo => ({ name: `system:node:${node}`, uid: `node:${node}`, groups: ["system:nodes", "system:authenticated"] })

/** Whether `headers` carry `token` as their bearer token (constant time). */
export const presents = (headers: Readonly<Record<string, string | undefined>>, token: string): boolean => {
  const presented = Authn.bearer(headers)
  return presented !== undefined && Authn.constantTimeEqual(presented, token)
}

/** A fresh loopback credential. */
export const loopback = (): { readonly token: string; readonly matches: (headers: Readonly<Record<string, string | undefined>>) => boolean } => {
  const token = randomBytes(32).toString("base64url")
  return {
    token,
    matches: (headers) => presents(headers, token)
  }
}

/** Every controller the server runs, minus the disabled. */
export const reconcilers = (options: Pick<Options, "disabled" | "controllers" | "extra">): ReadonlyArray<Controller.Reconciler> => {
  const disabled = new Set(options.disabled)
  return disabled.has("*") ? [] : [...Controllers.all({ ...options.controllers, disabled: [...disabled] }), ...(options.extra ?? []).filter((r) => !disabled.has(r.name))]
}

/** The names `--disable-controllers` accepts: every controller, and `scheduler`. */
export const names = (): ReadonlyArray<string> => [...Controllers.names(), "scheduler"]

/** Start the control plane against `handle` in the current scope. */
export const start = (handle: InProcess.Handle, token: string, options: Options, plane: { explain?: Placement.Explain }): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    const list = reconcilers(options)
    const scheduling = !options.disabled.includes("*") && !options.disabled.includes("scheduler")
    if (list.length === 0 && !scheduling && options.leading === undefined) return
    const client = Client.make({ server: "https://loopback.fleet.internal", token, transport: InProcess.transport(handle, { client: controllerUser.name }) })
    const election = options.elect
      ? { namespace: "kube-system", name: "fleet-controller-manager", identity: LeaderElection.identity(hostname(), process.pid) }
      : undefined
    // The scheduler leads with the controllers (one lease), sharing their informers; so does `leading`.
    const alongside = (running: Controller.Running) =>
      Effect.gen(function* () {
        if (options.leading !== undefined) yield* options.leading
        if (!scheduling) return
        const scheduler = yield* Scheduler.start({ informers: running.informers }).pipe(Effect.orDie)
        plane.explain = scheduler.explain
        yield* Effect.addFinalizer(() => Effect.sync(() => delete plane.explain))
      })
    // The built-in default class comes with its provisioner, as k3s's local-path (made again at
    // every start when deleted; `--disable-controllers local-path-provisioner` leaves it out).
    if (list.some((r) => r.name === "local-path-provisioner")) {
      yield* Effect.forkScoped(
        client.create({ ...Storage.localPathClass }).pipe(
          Effect.catchIf((e) => e.status.code === 409, () => Effect.void),
          Effect.retry(Schedule.spaced("1 second").pipe(Schedule.intersect(Schedule.recurs(30)))),
          Effect.catchAll((e) => Effect.logWarning(`the local-path StorageClass could not be created: ${e.status.message ?? ""}`))
        )
      )
    }
    yield* Effect.forkScoped(
      ControllerManager.run({
        reconcilers: list,
        component: "fleet-controller-manager",
        ...(scheduling || options.leading !== undefined ? { alongside } : {}),
        ...(election === undefined ? {} : { election })
      }).pipe(Effect.provideService(ApiClient.ApiClient, client), Effect.provideService(Store.Store, options.store))
    )
  })
