/**
 * What every section of the Store contract shares: how a test gets a fresh store, and the few
 * ways the tests look at outcomes and watches.
 */
import { Chunk, Effect, Either, Layer, Stream } from "effect"
import { it } from "vitest"
import { Store, type StoreService, type WatchEvent } from "../../../store/Store.js"

/** One contract test: a check against a fresh, empty store. */
export type Test = (store: StoreService) => Effect.Effect<void, unknown>

/** Register one contract test under its title. */
export type Register = (title: string, test: Test) => void

/** A `Register` that runs each test against a fresh build of `layer`. */
export const register = (layer: Layer.Layer<Store, unknown>, timeout: number): Register => {
  const run = (test: Test) => () =>
    Effect.runPromise(
      Effect.scoped(
        Effect.flatMap(Store, (store) => test(store)).pipe(Effect.provide(Layer.fresh(layer)))
      ) as Effect.Effect<void, unknown>
    )
  return (title, test) => it(title, run(test), timeout)
}

/** The tag of a failure, or "success". */
export const outcome = <A, E extends { readonly _tag: string }>(effect: Effect.Effect<A, E>) =>
  Effect.map(Effect.either(effect), (e) => (Either.isLeft(e) ? e.left : "success" as const))

/** Collect exactly `n` events from a watch. */
export const take = (store: StoreService, prefix: string, from: number, n: number) =>
  Stream.runCollect(Stream.take(store.watch(prefix, from), n)).pipe(
    Effect.map((c) => Chunk.toReadonlyArray(c)),
    Effect.timeoutFail({ duration: "10 seconds", onTimeout: () => new Error(`timed out waiting for ${n} events from ${from}`) })
  )

/** Events as "TYPE revision key" lines, for compact assertions. */
export const summary = (events: ReadonlyArray<WatchEvent>) => events.map((e) => `${e.type} ${e.revision} ${e.key}`)
