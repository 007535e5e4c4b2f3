"""Tiny XML writer for EC2/STS replies: el('a', el('b', 'text'), ...) -> '<a><b>text</b></a>'."""

from xml.sax.saxutils import escape

EC2_NS = "http://ec2.amazonaws.com/doc/2016-11-15/"
STS_NS = "https://sts.amazonaws.com/doc/2011-06-15/"


def el(name, *children):
    """children: strings that are already XML (from el), or a single Text value."""
    if not children:
        return "<%s/>" % name
    return "<%s>%s</%s>" % (name, "".join(children), name)


def t(name, value):
    """A leaf element with escaped text; None -> empty element; bool -> true/false."""
    if value is None:
        return "<%s/>" % name
    if isinstance(value, bool):
        value = "true" if value else "false"
    return "<%s>%s</%s>" % (name, escape(str(value)), name)


def items(name, seq):
    """<name><item>..</item>...</name>; seq: iterable of inner XML strings."""
    inner = "".join("<item>%s</item>" % s for s in seq)
    return "<%s>%s</%s>" % (name, inner, name) if inner else "<%s/>" % name


def ec2_response(action, request_id, body):
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<%sResponse xmlns="%s">%s%s</%sResponse>'
            % (action, EC2_NS, t("requestId", request_id), body, action)).encode()


def ec2_error(code, message, request_id):
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error>%s%s</Error></Errors>%s'
            '</Response>' % (t("Code", code), t("Message", message), t("RequestID", request_id))).encode()


def sts_response(action, request_id, result_body):
    return ('<%sResponse xmlns="%s"><%sResult>%s</%sResult><ResponseMetadata>%s</ResponseMetadata>'
            '</%sResponse>' % (action, STS_NS, action, result_body, action,
                               t("RequestId", request_id), action)).encode()


def sts_error(code, message, request_id, sender=True):
    return ('<ErrorResponse xmlns="%s"><Error>%s%s%s</Error>%s</ErrorResponse>'
            % (STS_NS, t("Type", "Sender" if sender else "Receiver"), t("Code", code),
               t("Message", message), t("RequestId", request_id))).encode()
