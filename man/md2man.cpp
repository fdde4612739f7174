// hwfarm_md2man: a docs page (the Markdown of docs/) as a man page, so the
// man pages say what the docs say. It knows the Markdown the docs use:
// headings, paragraphs, lists, fenced code, tables, inline code, bold and
// links; HTML comments are dropped. A table becomes one tagged paragraph per
// row (its first cell the tag), which reads better in 80 columns than tbl.
//
//   hwfarm_md2man NAME SECTION "SUMMARY" INPUT.md OUTPUT
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

// One UTF-8 code point from `s` at `i` (advanced past it); U+FFFD for a
// byte that does not begin a valid sequence.
unsigned long codePoint(const std::string& s, size_t& i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  int more = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : c >= 0xc0 ? 1 : 0;
  unsigned long cp = more == 3 ? c & 0x07 : more == 2 ? c & 0x0f : c & 0x1f;
  if (more == 0 || i + static_cast<size_t>(more) >= s.size()) {
    ++i;
    return 0xfffd;
  }
  for (int k = 1; k <= more; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) {
      ++i;
      return 0xfffd;
    }
    cp = (cp << 6) | (byte(i + k) & 0x3f);
  }
  i += static_cast<size_t>(more) + 1;
  return cp;
}

// Text for roff: backslashes and dashes escaped, other characters than
// ASCII as \[uXXXX].
std::string escape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      char name[16];
      std::snprintf(name, sizeof name, "\\[u%04lX]", codePoint(s, i));
      out += name;
      continue;
    }
    if (c == '\\') out += "\\e";
    else if (c == '-') out += "\\-";
    else out += static_cast<char>(c);
    ++i;
  }
  return out;
}

// Inline Markdown: `code` and **bold** in bold, [text](target) as its text
// (and an external target after it).
std::string inlineText(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    if (s[i] == '`') {
      size_t end = s.find('`', i + 1);
      if (end != std::string::npos) {
        out += "\\fB" + escape(s.substr(i + 1, end - i - 1)) + "\\fR";
        i = end + 1;
        continue;
      }
    }
    if (s.compare(i, 2, "**") == 0) {
      size_t end = s.find("**", i + 2);
      if (end != std::string::npos) {
        out += "\\fB" + inlineText(s.substr(i + 2, end - i - 2)) + "\\fR";
        i = end + 2;
        continue;
      }
    }
    if (s[i] == '[') {
      size_t close = s.find("](", i);
      size_t end = close == std::string::npos ? close : s.find(')', close);
      if (end != std::string::npos && s.find('\n', i) > end) {
        std::string target = s.substr(close + 2, end - close - 2);
        out += inlineText(s.substr(i + 1, close - i - 1));
        if (target.rfind("http", 0) == 0) out += " <" + escape(target) + ">";
        i = end + 1;
        continue;
      }
    }
    size_t next = s.find_first_of("`*[", i + 1);
    out += escape(s.substr(i, next == std::string::npos ? std::string::npos : next - i));
    i = next == std::string::npos ? s.size() : next;
  }
  return out;
}

// A roff text line: one that would start with "." or "'" is protected.
std::string textLine(const std::string& s) {
  return !s.empty() && (s[0] == '.' || s[0] == '\'') ? "\\&" + s : s;
}

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

std::vector<std::string> cells(const std::string& row) {
  std::vector<std::string> out;
  std::string cell;
  std::string r = trim(row);
  for (size_t i = 1; i < r.size(); ++i) {
    if (r[i] == '\\' && i + 1 < r.size() && r[i + 1] == '|') {
      cell += '|';
      ++i;
    } else if (r[i] == '|') {
      out.push_back(trim(cell));
      cell.clear();
    } else {
      cell += r[i];
    }
  }
  return out;
}

std::string headingText(std::string s) {
  std::string out;
  for (char c : s)
    if (c != '`') out += c;
  return out;
}

class Converter {
 public:
  explicit Converter(std::ostream& out) : out_(out) {}

  void convert(const std::vector<std::string>& lines) {
    for (size_t i = 0; i < lines.size();) i = block(lines, i);
  }

 private:
  // Converts the block starting at line `i`; returns the line after it.
  size_t block(const std::vector<std::string>& lines, size_t i) {
    const std::string& line = lines[i];
    std::string t = trim(line);
    if (t.empty()) return i + 1;
    if (t.rfind("<!--", 0) == 0) {
      while (i < lines.size() && lines[i].find("-->") == std::string::npos) ++i;
      return i + 1;
    }
    if (t.rfind("```", 0) == 0) {
      out_ << ".PP\n.RS 4\n.nf\n";
      for (++i; i < lines.size() && trim(lines[i]).rfind("```", 0) != 0; ++i)
        out_ << textLine(escape(lines[i].substr(std::min(lines[i].size(), indentOf(line))))) << "\n";
      out_ << ".fi\n.RE\n";
      return i + 1;
    }
    if (t[0] == '#') {
      size_t level = t.find_first_not_of('#');
      std::string text = headingText(trim(t.substr(level)));
      if (level == 1) return i + 1; // the page's title: the NAME line says it
      if (level == 2) {
        std::string upper;
        for (char c : text) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        out_ << ".SH \"" << escape(upper) << "\"\n";
      } else {
        out_ << ".SS \"" << escape(text) << "\"\n";
      }
      return i + 1;
    }
    if (t[0] == '|') return table(lines, i);
    if (listMarker(t)) return list(lines, i, indentOf(line));
    // A paragraph: up to a blank line or another block.
    out_ << ".PP\n";
    std::string text;
    for (; i < lines.size() && startsParagraphText(lines[i], text.empty()); ++i)
      text += (text.empty() ? "" : " ") + trim(lines[i]);
    out_ << textLine(inlineText(text)) << "\n";
    return i;
  }

  static size_t indentOf(const std::string& line) {
    size_t n = line.find_first_not_of(' ');
    return n == std::string::npos ? 0 : n;
  }

  // "- ", "* " or "1. ": the marker's length, or 0.
  static size_t listMarker(const std::string& t) {
    if (t.rfind("- ", 0) == 0 || t.rfind("* ", 0) == 0) return 2;
    size_t digits = t.find_first_not_of("0123456789");
    if (digits > 0 && digits != std::string::npos && t.compare(digits, 2, ". ") == 0) return digits + 2;
    return 0;
  }

  static bool startsParagraphText(const std::string& line, bool first) {
    std::string t = trim(line);
    if (t.empty() || t[0] == '#' || t[0] == '|' || t.rfind("```", 0) == 0 || t.rfind("<!--", 0) == 0) return false;
    return first || !listMarker(t);
  }

  // Items at `indent`: each its marker's line and the lines indented under
  // it (continuations, nested lists, code).
  size_t list(const std::vector<std::string>& lines, size_t i, size_t indent) {
    out_ << ".RS " << (depth_ ? 2 : 0) << "\n";
    ++depth_;
    while (i < lines.size()) {
      std::string t = trim(lines[i]);
      size_t marker = listMarker(t);
      if (t.empty() || !marker || indentOf(lines[i]) != indent) break;
      std::string tag = t[0] == '-' || t[0] == '*' ? "\\(bu" : t.substr(0, marker - 1);
      out_ << ".IP \"" << tag << "\" " << (tag.size() > 4 ? tag.size() : 4) << "\n";
      std::string text = t.substr(marker);
      for (++i; i < lines.size() && !trim(lines[i]).empty() && indentOf(lines[i]) > indent &&
                !listMarker(trim(lines[i])) && trim(lines[i]).rfind("```", 0) != 0;
           ++i)
        text += " " + trim(lines[i]);
      out_ << textLine(inlineText(text)) << "\n";
      // What is indented under the item (after blank lines too): nested lists, code.
      while (true) {
        size_t j = i;
        while (j < lines.size() && trim(lines[j]).empty()) ++j;
        if (j >= lines.size() || indentOf(lines[j]) <= indent) break;
        i = block(lines, j);
      }
      while (i < lines.size() && trim(lines[i]).empty() && i + 1 < lines.size() &&
             indentOf(lines[i + 1]) == indent && listMarker(trim(lines[i + 1])))
        ++i;
    }
    --depth_;
    out_ << ".RE\n";
    return i;
  }

  // A table: a tagged paragraph per row, the first cell the tag, the other
  // cells "Header: value", the last (the meaning) on its own.
  size_t table(const std::vector<std::string>& lines, size_t i) {
    std::vector<std::string> header = cells(lines[i]);
    i += 2; // the header and the |---| line
    for (; i < lines.size() && trim(lines[i]).rfind("|", 0) == 0; ++i) {
      std::vector<std::string> row = cells(lines[i]);
      if (row.empty()) continue;
      out_ << ".TP\n" << textLine(inlineText(row[0])) << "\n";
      std::string details;
      for (size_t c = 1; c + 1 < row.size(); ++c)
        if (!row[c].empty())
          details += (details.empty() ? "" : "; ") + (c < header.size() ? header[c] + ": " : "") + row[c];
      if (!details.empty()) out_ << textLine(inlineText(details)) << "\n";
      if (row.size() > 1) {
        if (!details.empty()) out_ << ".br\n";
        out_ << textLine(inlineText(row.back())) << "\n";
      }
    }
    return i;
  }

  std::ostream& out_;
  int depth_ = 0;
};

} // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: hwfarm_md2man NAME SECTION SUMMARY INPUT.md OUTPUT\n");
    return 2;
  }
  std::ifstream in(argv[4]);
  if (!in) {
    std::fprintf(stderr, "hwfarm_md2man: cannot read %s\n", argv[4]);
    return 1;
  }
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::string name = argv[1], section = argv[2];
  std::string upper;
  for (char c : name) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::ostringstream page;
  std::string source = argv[4];
  source = "docs/" + source.substr(source.find_last_of('/') + 1);
  page << ".\\\" Generated by hwfarm_md2man from " << source << "; edit that file instead.\n"
       << ".TH \"" << escape(upper) << "\" \"" << section << "\" \"\" \"hwfarm\" \"hwfarm\"\n"
       << ".nh\n.ad l\n"
       << ".SH NAME\n" << escape(name) << " \\- " << escape(argv[3]) << "\n.SH DESCRIPTION\n";
  Converter(page).convert(lines);
  std::ofstream out(argv[5], std::ios::trunc);
  out << page.str();
  out.close();
  if (!out) {
    std::fprintf(stderr, "hwfarm_md2man: cannot write %s\n", argv[5]);
    return 1;
  }
  return 0;
}
