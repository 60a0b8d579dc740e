/**
 * Per-user watch admission (issue 29): the watches each authenticated user has open, counted
 * after authentication (so many tokens of one ServiceAccount share one count), and the bytes
 * they owe their clients (core's WatchBudget).
 */
import { type Http, Status, WatchBudget } from "@koder/fleet-core"
import type { ServerResponse } from "node:http"
import * as JsonResponse from "./JsonResponse.js"

/** Open watches per user, their bound, and the users' budget. */
export interface UserWatches {
  /** Concurrent watches per user. */
  readonly maxWatches: number
  /** Users with at least one watch open. */
  readonly perUser: Map<string, number>
  /** The bytes each user's watches owe their clients. */
  readonly budget: WatchBudget.WatchBudget
}

/** No user has a watch open yet; `bytesPerUser` 0: no budget. */
export const make = (maxWatches: number, bytesPerUser: number): UserWatches => ({ maxWatches, perUser: new Map(), budget: WatchBudget.make(bytesPerUser) })

/** Answer 429 with `Retry-After` and give `false`. */
const refuse = (res: ServerResponse, message: string, retryAfter: number): false => {
  JsonResponse.send(res, JsonResponse.ofStatus(Status.tooManyRequests(message, retryAfter), { "retry-after": String(retryAfter) }))
  return false
}

/**
 * A watch's user may open it: under the per-user count and within its WatchBudget. Answers
 * 429 and gives `false` when not; the count and the budget are returned when the response ends.
 */
export const admit = (users: UserWatches, res: ServerResponse, watch: NonNullable<Http.StreamResponse["watch"]>): WatchBudget.Backlog | false => {
  const { perUser, budget, maxWatches } = users
  const count = perUser.get(watch.user) ?? 0
  if (count >= maxWatches) return refuse(res, `Too many requests: user ${JSON.stringify(watch.user)} already has ${maxWatches} concurrent watches, please try again later.`, 1)
  const backlog = budget.admit(watch.user, watch.initialBytes)
  if (backlog === undefined) {
    return refuse(
      res,
      `Too many requests: the watches of user ${JSON.stringify(watch.user)} owe their clients ${budget.used(watch.user)} bytes not yet read (the budget is ${budget.bytesPerUser}), please try again later.`,
      5
    )
  }
  perUser.set(watch.user, count + 1)
  let released = false
  const release = () => {
    if (released) return
    released = true
    backlog.release()
    const left = (perUser.get(watch.user) ?? 1) - 1
    if (left === 0) perUser.delete(watch.user)
    else perUser.set(watch.user, left)
  }
  res.once("finish", release)
  res.once("close", release)
  return backlog
}
