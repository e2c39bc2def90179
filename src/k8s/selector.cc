#include "k8s/selector.h"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

#include "common/strings.h"

namespace hami::k8s {
namespace {

// Splits on commas that are not inside parentheses.
std::vector<std::string_view> SplitTopLevel(std::string_view s) {
  std::vector<std::string_view> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '(') ++depth;
    if (s[i] == ')') --depth;
    if (s[i] == ',' && depth == 0) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  out.push_back(s.substr(start));
  return out;
}

bool ValidKey(std::string_view key) {
  if (key.empty() || key.size() > 317) return false;
  return std::all_of(key.begin(), key.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ||
           c == '/';
  });
}

bool ValidValue(std::string_view v) {
  return v.size() <= 63 && std::all_of(v.begin(), v.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
         });
}

// Parses "key in (a, b)" / "key notin (a,b)"; returns false when `req` is not of that form.
Result<bool> ParseSetRequirement(std::string_view req, LabelSelector::Requirement& out) {
  size_t open = req.find('(');
  if (open == std::string_view::npos) return false;
  if (req.back() != ')') return Error{"label selector requirement " + Quote(req) + ": missing ')'"};
  std::string_view head = Trim(req.substr(0, open));
  size_t space = head.find_last_of(" \t");
  if (space == std::string_view::npos) {
    return Error{"label selector requirement " + Quote(req) + ": want \"key in (values)\""};
  }
  std::string_view op = head.substr(space + 1);
  out.key = std::string(Trim(head.substr(0, space)));
  if (op == "in") {
    out.op = LabelSelector::Op::kIn;
  } else if (op == "notin") {
    out.op = LabelSelector::Op::kNotIn;
  } else {
    return Error{"label selector requirement " + Quote(req) + ": unknown operator " + Quote(op)};
  }
  for (std::string_view v : Split(req.substr(open + 1, req.size() - open - 2), ',')) {
    std::string_view value = Trim(v);
    if (!ValidValue(value)) {
      return Error{"label selector requirement " + Quote(req) + ": bad value " + Quote(value)};
    }
    out.values.emplace_back(value);
  }
  return true;
}

Result<LabelSelector::Requirement> ParseLabelRequirement(std::string_view req) {
  LabelSelector::Requirement out;
  auto set = ParseSetRequirement(req, out);
  if (!set) return std::move(set).take_error();
  if (!*set) {
    size_t pos;
    if ((pos = req.find("!=")) != std::string_view::npos) {
      out.op = LabelSelector::Op::kNotEquals;
      out.key = std::string(Trim(req.substr(0, pos)));
      out.values.emplace_back(Trim(req.substr(pos + 2)));
    } else if ((pos = req.find("==")) != std::string_view::npos) {
      out.op = LabelSelector::Op::kEquals;
      out.key = std::string(Trim(req.substr(0, pos)));
      out.values.emplace_back(Trim(req.substr(pos + 2)));
    } else if ((pos = req.find('=')) != std::string_view::npos) {
      out.op = LabelSelector::Op::kEquals;
      out.key = std::string(Trim(req.substr(0, pos)));
      out.values.emplace_back(Trim(req.substr(pos + 1)));
    } else if (!req.empty() && req[0] == '!') {
      out.op = LabelSelector::Op::kDoesNotExist;
      out.key = std::string(Trim(req.substr(1)));
    } else {
      out.op = LabelSelector::Op::kExists;
      out.key = std::string(req);
    }
    for (const auto& v : out.values) {
      if (!ValidValue(v)) {
        return Error{"label selector requirement " + Quote(req) + ": bad value " + Quote(v)};
      }
    }
  }
  if (!ValidKey(out.key)) {
    return Error{"label selector requirement " + Quote(req) + ": bad key " + Quote(out.key)};
  }
  return out;
}

}  // namespace

Result<LabelSelector> LabelSelector::Parse(std::string_view text) {
  LabelSelector sel;
  if (Trim(text).empty()) return sel;
  for (std::string_view raw : SplitTopLevel(text)) {
    auto req = ParseLabelRequirement(Trim(raw));
    if (!req) return std::move(req).take_error();
    sel.requirements_.push_back(std::move(*req));
  }
  return sel;
}

bool LabelSelector::Matches(const StringMap& labels) const {
  for (const auto& r : requirements_) {
    auto it = labels.find(r.key);
    bool has = it != labels.end();
    auto in_values = [&] {
      return has && std::find(r.values.begin(), r.values.end(), it->second) != r.values.end();
    };
    switch (r.op) {
      case Op::kEquals:
      case Op::kIn:
        if (!in_values()) return false;
        break;
      case Op::kNotEquals:
      case Op::kNotIn:
        if (in_values()) return false;
        break;
      case Op::kExists:
        if (!has) return false;
        break;
      case Op::kDoesNotExist:
        if (has) return false;
        break;
    }
  }
  return true;
}

bool LabelSelector::MatchesObject(const Json& obj) const { return empty() || Matches(Labels(obj)); }

Result<FieldSelector> FieldSelector::Parse(std::string_view text) {
  FieldSelector sel;
  if (Trim(text).empty()) return sel;
  for (std::string_view raw : Split(text, ',')) {
    std::string_view req = Trim(raw);
    Requirement r;
    size_t pos;
    size_t skip;
    if ((pos = req.find("!=")) != std::string_view::npos) {
      r.negate = true;
      skip = 2;
    } else if ((pos = req.find("==")) != std::string_view::npos) {
      skip = 2;
    } else if ((pos = req.find('=')) != std::string_view::npos) {
      skip = 1;
    } else {
      return Error{"field selector requirement " + Quote(req) + ": want \"path=value\""};
    }
    r.path = std::string(Trim(req.substr(0, pos)));
    r.value = std::string(Trim(req.substr(pos + skip)));
    if (r.path.empty()) {
      return Error{"field selector requirement " + Quote(req) + ": empty field path"};
    }
    sel.requirements_.push_back(std::move(r));
  }
  return sel;
}

bool FieldSelector::Matches(const Json& obj) const {
  for (const auto& r : requirements_) {
    bool eq = FieldString(obj, r.path) == r.value;
    if (eq == r.negate) return false;
  }
  return true;
}

}  // namespace hami::k8s
