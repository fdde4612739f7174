// The upload routes (docs/api.md "Uploads", docs/uploads.md): the durable
// queue of runs going to the S3 bucket, and re-queueing one.
#include "daemon/api/routes.h"
#include "daemon/core/upload/policy.h"

namespace hwfarm::api {

using config::Role;

namespace {

json::object uploadJson(const store::StoredUpload& u) {
  json::object o{{"run", u.run_id},
                 {"lease", u.lease_id},
                 {"state", u.state},
                 {"verdict", u.verdict},
                 {"day", u.day},
                 {"commit", u.commit},
                 {"key", u.key},
                 {"objects_uploaded", u.uploaded.size()},
                 {"failures", u.failures},
                 {"error", u.error},
                 {"updated_at", upload::utcTime(u.updated_ms)}};
  if (u.state == "pending" && u.failures > 0) o["next_attempt_at"] = upload::utcTime(u.next_ms);
  return o;
}

} // namespace

void Handlers::listUploads(Call& c) {
  if (!uploads_) return c.respond(jsonError(503, "unavailable", "uploads are not served here"));
  json::array list;
  for (const auto& u : uploads_->unfinished()) list.push_back(uploadJson(u));
  c.respond(ok(json::object{{"enabled", uploads_->enabled()}, {"uploads", std::move(list)}}));
}

void Handlers::retryUpload(Call& c, const std::string& run) {
  if (!uploads_) return c.respond(jsonError(503, "unavailable", "uploads are not served here"));
  // Disabled: no run has an upload to retry, whatever the id.
  if (!uploads_->enabled())
    return c.respond(jsonError(409, "uploads_disabled", "uploads are disabled ([upload] enabled = false)"));
  const store::StoredUpload* u = uploads_->find(run);
  if (!u) return c.respond(jsonError(404, "not_found", "no upload of run " + echoed(run)));
  if (const lease::Lease* l = leases_.scheduler().lease(u->lease_id);
      !hasRole(*c.principal, Role::operator_) && (!l || l->holder.principal != c.principal->name))
    return c.respond(jsonError(403, "forbidden", "run " + run + " is not of a lease of \"" + c.principal->name + "\""));
  Reply reply = c.respond;
  UploadService* uploads = uploads_;
  Status s = uploads_->retry(run, [reply, uploads, run](const Status& stored) {
    if (!stored.ok()) return reply(errorResponse(stored));
    const store::StoredUpload* now = uploads->find(run);
    reply(ok(now ? uploadJson(*now) : json::object{{"run", run}}, 202));
  });
  if (s.is(Code::unsupported)) return c.respond(jsonError(409, "uploads_disabled", s.message())); // the exception
  if (!s.ok()) return c.respond(errorResponse(s));
}

} // namespace hwfarm::api
