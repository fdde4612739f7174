// The baseline for bench/lease_bench: the least a Beast server can do to
// answer hwfarmd's lease requests. It parses the same JSON bodies and sends
// lease-shaped answers, on one thread like hwfarmd, but keeps no state,
// schedules nothing and writes nothing to disk.
#include <cstdio>
#include <memory>
#include <string>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using tcp = asio::ip::tcp;

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  explicit Session(tcp::socket socket) : stream_(std::move(socket)) {}
  void read() {
    request_ = {};
    http::async_read(stream_, buffer_, request_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (!ec) self->answer();
    });
  }

 private:
  void answer() {
    auto response = std::make_shared<http::response<http::string_body>>(http::status::ok, 11);
    response->set(http::field::content_type, "application/json");
    if (request_.method() == http::verb::post) {
      boost::system::error_code ec;
      json::value body = json::parse(request_.body(), ec);
      std::string type = ec ? "" : std::string(body.at("selector").at("type").as_string());
      response->result(http::status::created);
      response->body() = json::serialize(json::object{
          {"id", std::to_string(++counter_)},
          {"state", "active"},
          {"holder", json::object{{"principal", "anonymous"}}},
          {"expires_at", "2026-11-30T00:00:00.000Z"},
          {"boards", json::array{json::object{{"name", "b"}, {"type", type}, {"status", "ok"}}}}});
    } else {
      response->body() = R"({"state":"released"})";
    }
    response->keep_alive(request_.keep_alive());
    response->prepare_payload();
    http::async_write(stream_, *response, [self = shared_from_this(), response](beast::error_code ec, size_t) {
      if (!ec) self->read();
    });
  }

  static inline uint64_t counter_ = 0;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> request_;
};

void accept(tcp::acceptor& acceptor) {
  acceptor.async_accept([&acceptor](beast::error_code ec, tcp::socket socket) {
    if (!ec) std::make_shared<Session>(std::move(socket))->read();
    accept(acceptor);
  });
}

} // namespace

int main() {
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  std::printf("listening on http://127.0.0.1:%u\n", acceptor.local_endpoint().port());
  std::fflush(stdout);
  accept(acceptor);
  io.run();
}
