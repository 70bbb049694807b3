# The thermostat's display: an SSD1306 128 x 64 on I2C, drawn with framebuf (the stock image's), set up with the
# controller's power-on sequence from Solomon Systech's datasheet (section 8.9's flow chart and its commands).
import framebuf

# Display off; horizontal addressing; start line 0; column 127 to SEG0 (A1) and COM scan from COM63 (C8), so that
# x runs right and y down on a module mounted the usual way; 64 rows; no offset; COM pins alternative; clock;
# precharge; VCOMH; contrast; follow RAM; not inverted; charge pump on; display on.
_SETUP = bytes((0x00, 0xAE, 0x20, 0x00, 0x40, 0xA1, 0xA8, 63, 0xC8, 0xD3, 0x00, 0xDA, 0x12, 0xD5, 0x80, 0xD9, 0xF1,
                0xDB, 0x30, 0x81, 0xCF, 0xA4, 0xA6, 0x8D, 0x14, 0xAF))  # fmt: skip
_WHOLE = bytes((0x00, 0x21, 0, 127, 0x22, 0, 7))  # columns 0 to 127, pages 0 to 7: the frame that follows fills them


class Screen:
    def __init__(self, i2c, address=0x3C):
        self.i2c = i2c
        self.address = address
        self.buffer = bytearray(1 + 128 * 8)  # a control byte (0x40: data follows), then the frame
        self.buffer[0] = 0x40
        self.frame = framebuf.FrameBuffer(memoryview(self.buffer)[1:], 128, 64, framebuf.MONO_VLSB)
        i2c.writeto(address, _SETUP)  # (control byte 0x00: commands follow)

    def show(self, celsius, setpoint, heating):
        frame = self.frame
        frame.fill(0)
        frame.text("--.- C" if celsius is None else "%.1f C" % celsius, 0, 0, 1)
        frame.text("set %.1f C" % setpoint, 0, 16, 1)
        if heating:
            frame.fill_rect(0, 32, 128, 16, 1)
            frame.text("HEATING", 36, 36, 0)
        self.i2c.writeto(self.address, _WHOLE)
        self.i2c.writeto(self.address, self.buffer)
