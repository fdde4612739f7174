// The CI integration routes: POST /v1/should-run (whether a build should use
// this agent's hardware) and GET /v1/leases/{id}/twister-hwmap (a lease's
// boards as Zephyr twister hardware-map entries).
#include <algorithm>

#include "daemon/api/routes.h"
#include "daemon/core/ci/should_run.h"

namespace hwfarm::api {
namespace {

// A POST /v1/should-run body: {"context", "title", "labels", "comment"},
// strictly (unknown fields, wrong types and oversized values are errors).
Result<ci::Trigger> parseTrigger(const std::string& body) {
  Result<json::object> o = parseObject(body);
  if (!o) return o.status();
  ci::Trigger t;
  auto fail = [](std::string_view key, const std::string& why) {
    return Status::error(Code::invalid_argument, echoed(key) + ": " + why);
  };
  // Text fields: strings of at most `max` bytes; one-line ones (the title,
  // labels) without control characters.
  auto textOf = [&](std::string_view key, const json::value& v, size_t max, bool one_line, std::string* out) {
    if (!v.is_string()) return fail(key, "expected a string");
    std::string_view s(v.as_string().data(), v.as_string().size());
    if (s.size() > max) return fail(key, "longer than " + std::to_string(max) + " bytes");
    if (one_line && config::findControlCharacter(s) != std::string_view::npos)
      return fail(key, "contains a control character");
    *out = std::string(s);
    return Status::success();
  };
  bool has_context = false;
  for (const auto& [key, v] : *o) {
    if (key == "context") {
      std::string text;
      if (Status e = textOf(key, v, 16, true, &text); !e.ok()) return e;
      auto c = lease::contextFromString(text);
      if (!c) return fail(key, "expected pr, pr-tagged, nightly or manual, got \"" + echoed(text) + "\"");
      t.context = *c;
      has_context = true;
    } else if (key == "title") {
      if (Status e = textOf(key, v, ci::kMaxTitleBytes, true, &t.title); !e.ok()) return e;
    } else if (key == "comment") {
      if (Status e = textOf(key, v, ci::kMaxCommentBytes, false, &t.comment); !e.ok()) return e;
    } else if (key == "labels") {
      if (!v.is_array()) return fail(key, "expected an array of strings");
      if (v.as_array().size() > ci::kMaxLabels)
        return fail(key, "more than " + std::to_string(ci::kMaxLabels) + " labels");
      for (const auto& item : v.as_array()) {
        std::string label;
        if (Status e = textOf(key, item, ci::kMaxLabelBytes, true, &label); !e.ok()) return e;
        t.labels.push_back(std::move(label));
      }
    } else {
      return fail(key, "unknown field");
    }
  }
  if (!has_context) return fail("context", "required field is missing");
  return t;
}

ci::TagRules rulesOf(const config::ShouldRunConfig& c) { return ci::TagRules{c.tags, c.labels, c.bot_commands}; }

} // namespace

void Handlers::shouldRun(Call& c) {
  Result<ci::Trigger> trigger = parseTrigger(c.request.body);
  if (!trigger) return c.respond(errorResponse(trigger.status()));
  ci::Decision d = ci::shouldRun(rulesOf(state_.config->should_run), *trigger, state_.effective_tier);
  json::object body{{"run", d.run},
                    {"reason", d.reason},
                    {"context", lease::toString(trigger->context)},
                    {"lease_context", lease::toString(d.lease_context)},
                    {"matched", d.matched.empty() ? json::value(nullptr) : json::value(d.matched)},
                    {"effective_tier", state_.effective_tier},
                    {"registered_tier", state_.config->agent.tier}};
  c.respond(ok(body));
}

void Handlers::twisterHwmap(Call& c, const std::string& id) {
  const lease::Lease* l = leases_.scheduler().lease(id);
  if (!l) return c.respond(jsonError(404, "not_found", "no lease " + echoed(id)));
  if (l->state != lease::LeaseState::active)
    return c.respond(jsonError(409, "not_active", "lease " + id + " has ended (" + l->end_reason + ")"));
  const auto& twister = state_.config->twister;
  json::array entries;
  std::string unmapped;
  for (const auto& lb : l->boards) {
    const lease::Board* board = leases_.scheduler().board(lb.name);
    const config::BoardConfig* config = state_.config->findBoard(lb.name);
    if (!board || !config) continue; // gone from the config by a reload: not the lease's to hand out
    auto t = std::find_if(twister.begin(), twister.end(),
                          [&](const config::TwisterConfig& tw) { return tw.type == board->spec.type; });
    if (t == twister.end()) {
      if (unmapped.find("\"" + board->spec.type + "\"") == std::string::npos)
        unmapped += (unmapped.empty() ? "\"" : ", \"") + board->spec.type + "\"";
      continue;
    }
    const std::string& usb = board->spec.usb_serial;
    json::object e{{"board", lb.name},
                   {"connected", !lb.lost},
                   {"id", usb.empty() ? lb.name : usb},
                   {"platform", t->platform},
                   {"product", t->product.empty() ? board->spec.type : t->product},
                   {"runner", t->runner},
                   {"baud", t->baud.value_or(config->serial.baud)}};
    if (!board->spec.serial_port.empty()) e["serial"] = board->spec.serial_port;
    else
      e["notes"] = "hwfarm board " + lb.name + " (" + board->spec.driver + "): no serial device; its console is "
                   "hwfarmctl console " + id + " " + lb.name;
    entries.emplace_back(std::move(e));
  }
  if (!unmapped.empty())
    return c.respond(jsonError(409, "no_twister_mapping",
                               "no [[twister]] entry in the fleet config for board type " + unmapped));
  c.respond(ok(json::object{{"lease", id}, {"boards", std::move(entries)}}));
}

} // namespace hwfarm::api
